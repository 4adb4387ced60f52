"""Pools: a scenario's fleet resolved into replica parameters, context windows and economics.

Main entry: :func:`build_pools` (scenario + fleet -> one :class:`PoolModel` per pool, checked
against the model's context window and the catalogs). A pool whose configuration has no
calibration runs on spec-based priors and says so (``calibrated=False`` and its ``source``).
A pool runs with the engine settings it states (``server:``, as a plan's pools record them),
else with those of its configuration's scenario candidate, as the optimizer measured its
capacity.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import FleetplanError, InputError
from fleetplan.fleet.accounting import PoolEconomics, embodied_g_per_gpu_hour, power_model
from fleetplan.profiles.store import ProfileStore, load_profiles
from fleetplan.replica.params import ReplicaParams, replica_params
from fleetplan.replica.steady import cached_prompt_tokens, prefill_tokens
from fleetplan.scenario import Pool, Scenario, match_pools
from fleetplan.scenario.engine import candidate_servers
from fleetplan.scenario.reliability import entry, pool_price
from fleetplan.scenario.served import class_variants, is_multi_model
from fleetplan.validate.server_params import apply_stated


@dataclass(frozen=True)
class PoolModel:
    """One pool, ready to simulate and to account for."""

    index: int
    spec: Pool
    params: ReplicaParams
    context_window: int
    economics: PoolEconomics

    @property
    def label(self) -> str:
        return self.spec.label

    @property
    def count(self) -> int:
        return self.spec.count


def build_pools(scenario: Scenario, fleet: Sequence[Pool],
                store: ProfileStore | None = None) -> list[PoolModel]:
    """Resolve every pool of ``fleet`` (replica parameters, window, price, power, grid), from
    the scenario's data context (catalog, calibration; its store unless ``store`` is given)."""
    if not fleet:
        raise InputError("fleet: no pools to simulate; give a fleet in the scenario or --fleet")
    ctx = scenario.data_context()
    if store is None:
        store = load_profiles(default=ctx.store)
    cat = ctx.catalog
    out = []
    seen: dict[str, int] = {}
    servers = candidate_servers(scenario.candidates)
    for i, pool in enumerate(fleet):
        if pool.label in seen:
            raise InputError(f"fleet[{i}]: pool {pool.label} repeats fleet[{seen[pool.label]}]; "
                             "give one entry per configuration and region")
        seen[pool.label] = i
        hw = pool.hardware
        model = pool.model if pool.model is not None else scenario.one_model
        try:  # the engine settings of the configuration's candidate, where it states any
            params = apply_stated(replica_params(model, pool.config, catalog=cat,
                                                 calibration=ctx.calibration),
                                  pool.server.stated() if pool.server is not None
                                  else servers.get(pool.config), catalog=cat,
                                  where=f"fleet[{i}].server" if pool.server is not None
                                  else f"the server: of candidate {pool.config}")
        except FleetplanError as exc:
            raise InputError(f"fleet[{i}] ({pool.config}): {exc}") from None
        window = params.max_model_len
        if scenario.context_window is not None:
            if scenario.context_window > params.max_model_len:
                raise InputError(
                    f"context_window = {scenario.context_window}: {pool.config} serving "
                    f"{model} holds at most {params.max_model_len} tokens per sequence "
                    f"(model card and KV cache; {params.source})")
            window = scenario.context_window
        price = cat.price(hw.gpu, scenario.market, scenario.prices_usd_per_gpu_hour)
        # spot (a spot pool, or a market: spot entry): the catalog's spot row or the discount
        per_gpu, price_src = pool_price(
            entry(scenario.reliability, pool.config, hw.gpu, pool.market), hw.gpu,
            price.price_usd_per_gpu_hour, f"{price.market} {price.price_date}: {price.source}",
            price.market == "user", catalog=cat)
        grid = cat.grid_intensity(pool.region, scenario.grid_g_per_kwh)
        emb, emb_src = embodied_g_per_gpu_hour(hw.gpu, scenario.embodied.include,
                                               scenario.embodied.lifetime_years, cat)
        econ = PoolEconomics(
            label=pool.label, gpus=pool.count * hw.gpu_count,
            price_usd_per_gpu_hour=per_gpu, price_source=price_src,
            power=power_model(model, pool.config, hw.gpu, hw.gpu_count, store,
                              scenario.power_w_per_gpu, scenario.power.model, cat),
            grid_g_per_kwh=grid.g_co2_per_kwh,
            grid_source=f"{grid.region} {grid.year}: {grid.source}",
            embodied_g_per_gpu_hour=emb, embodied_source=emb_src,
        )
        out.append(PoolModel(i, pool, params, window, econ))
    return out


def class_pools(scenario: Scenario, pools: Sequence[PoolModel]) -> list[list[int]]:
    """Per class, the pools it may be routed to: its split's pools under planned routing, its
    pins otherwise, else every pool."""
    fleet = [p.spec for p in pools]
    if not is_multi_model(scenario):
        return _class_pools(scenario, fleet)
    out = []  # a class goes only to replicas of its model
    for i, ks in enumerate(_class_pools(scenario, fleet)):
        models = class_variants(scenario, i)  # a list of variants: any of them
        mine = [k for k in ks if fleet[k].model in models]
        if not mine:
            raise InputError(f"classes[{i}] ({scenario.classes[i].name}): no pool it may use "
                             f"serves its model {' or '.join(models)} (pools: "
                             f"{', '.join(p.label for p in fleet)})")
        out.append(mine)
    return out


def _class_pools(scenario: Scenario, fleet: Sequence[Pool]) -> list[list[int]]:
    out = []
    for i, c in enumerate(scenario.classes):
        if scenario.routing.policy == "planned":
            if c.split is None:
                raise InputError(f"classes[{i}].split: routing planned needs a split per class")
            keys = [k for k, s in c.split.items() if s > 0]
        elif c.pin is not None:
            keys = list(c.pin)
        else:
            out.append(list(range(len(fleet))))
            continue
        idx: set[int] = set()
        for k in keys:
            try:
                idx.update(match_pools(k, fleet, scenario.data_context().catalog))
            except InputError as exc:
                field = "split" if scenario.routing.policy == "planned" else "pin"
                raise InputError(f"classes[{i}].{field}: {exc}") from None
        out.append(sorted(idx))
    return out


def split_weights(scenario: Scenario, pools: Sequence[PoolModel]) -> list[list[float] | None]:
    """Per class, its planned share per pool (a key naming several pools divides its share by
    their replica counts); ``None`` for a class without a split."""
    fleet = [p.spec for p in pools]
    out: list[list[float] | None] = []
    for c in scenario.classes:
        if c.split is None:
            out.append(None)
            continue
        w = [0.0] * len(pools)
        for key, share in c.split.items():
            hits = match_pools(key, fleet, scenario.data_context().catalog)
            total = sum(pools[h].count for h in hits)
            for h in hits:
                w[h] += share * pools[h].count / total
        out.append(w)
    return out


def p99_prompt_tokens(scenario: Scenario, class_index: int, sample: np.ndarray | None) -> int:
    """The class's 99th-percentile prompt tokens to prefill (from ``sample`` when given, else
    drawn; tokens in the prefix cache per the class's ``prefix_cache_hit`` do not count)."""
    if sample is not None and sample.size:
        return int(math.ceil(float(np.quantile(sample, 0.99))))
    c = scenario.classes[class_index]
    ins, _ = c.length_model().sample(4000, np.random.default_rng(12345))
    ins = prefill_tokens(ins, cached_prompt_tokens(ins, c.prefix_cache_hit))
    return int(math.ceil(float(np.quantile(ins, 0.99))))


def unloaded_ttft_s(params: ReplicaParams, prompt_tokens: int) -> float:
    """TTFT of one request on an idle replica: overhead plus its chunked prefill steps (and
    the host's lag for the one output of its last step, :mod:`fleetplan.replica.delivery`)."""
    budget = params.max_num_batched_tokens
    left, t, done = prompt_tokens, params.overhead_s, 0
    while left > 0:
        chunk = min(left, budget)
        done += chunk
        t += params.step_s(chunk, 0, done)
        left -= chunk
    return t + params.c_deliver
