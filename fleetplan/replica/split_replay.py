"""A benchmark run on a server of several engines: data-parallel replicas and the micro-batches
of a pipeline-parallel replica, each engine taking its share of the load.

A configuration laid out as ``dp`` replicas of ``pp`` pipeline stages
(:class:`~fleetplan.catalog.hardware.HardwareConfig`, ``8xH100-SXM+tp4pp2``) serves a run as
``dp x pp`` identical engines (:attr:`HardwareConfig.engines`), each one replica's micro-batch
engine (:func:`fleetplan.replica.priors.prior_params`: its step runs every stage, it holds
``1 / pp`` of the replica's KV cache and ``max_num_seqs``). A run's load is split over them:

- a Poisson (or gamma) stream of rate ``R``: ``R / k`` each (a random split of a Poisson
  stream is Poisson; vLLM's DP balancer picks the least-loaded engine, which is no worse);
- a client's cap of ``N`` requests in flight: ``N`` dealt as evenly as whole requests go
  (``N = 5`` over two engines: 3 and 2), the run's prompts in proportion to each engine's cap
  (an engine without a slot gets none: at concurrency 1 a pipeline-parallel server runs one
  micro-batch at a time, the bubble);
- a burst of ``n`` requests: ``n`` dealt as evenly as whole requests go.

Each distinct share (engines of equal share are identical, so one simulation stands for all of
them) is simulated as one engine of :mod:`fleetplan.replica.protocol`; the run's metrics pool
the engines' requests (each share weighted by how many engines hold it): throughput is every
engine's requests over the longest engine's run, latency percentiles are over the pooled
requests, each engine's host delivering its own outputs (:mod:`fleetplan.replica.delivery`).
When every engine holds the same share the run *is* one engine's run at ``1 / k`` of the load,
its throughput ``k`` times (the law ``tests/replica/test_split_replay.py`` checks). Recorded
lengths (``request_lengths``) are dealt to the engines in send order, round robin over the
engines with prompts left, and each engine is simulated with its own requests. Not used on
several engines: ``pinned_outputs`` (which engine's replies end the burst is not known) and the
prefix cache's bookkeeping of earlier runs (``prefix_runs_before``): a run is cold unless
``warm_prefix_cache``.

Main entry: :func:`replay_engines`, which :func:`fleetplan.replica.protocol.replay` calls when
its parameters' server has more than one engine (:func:`params_engines`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.replica.delivery import client_lags
from fleetplan.replica.engine import ReplicaEngine, Request
from fleetplan.replica.params_record import ReplicaParams
from fleetplan.replica.records import EngineStats
from fleetplan.workload.lengths import LengthModel


def engine_count(config: str, *, lockstep: bool = False) -> int:
    """The engines a configuration name spreads a load over (``dp x pp``; 1 for a plain
    ``<count>x<GPU>``), read from the name. ``lockstep``: the data-parallel ranks step together
    as one engine (an MoE model's, :func:`fleetplan.replica.priors.lockstep_config`), so only
    the pipeline's micro-batch engines count."""
    lay = HardwareConfig.split_layout(config)
    return (1 if lockstep else int(lay.get("dp", 1))) * int(lay.get("pp_size", 1))


def params_engines(params: ReplicaParams) -> int:
    """The engines ``params``' server spreads a load over: :func:`engine_count` of its
    configuration, an MoE model's data-parallel ranks one engine."""
    return engine_count(params.config, lockstep=params.is_moe)


def deal(total: int, k: int) -> list[int]:
    """``total`` whole requests dealt over ``k`` engines as evenly as they go, the larger
    shares first (``deal(5, 2) == [3, 2]``)."""
    q, r = divmod(total, k)
    return [q + 1] * r + [q] * (k - r)


def proportional(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainders first, ties to the
    earlier engine); zero weight: zero."""
    whole = sum(weights)
    raw = [total * w / whole for w in weights]
    out = [math.floor(x) for x in raw]
    order = sorted(range(len(weights)), key=lambda i: (-(raw[i] - out[i]), i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


@dataclass(frozen=True)
class Share:
    """One engine's part of a run: its prompts, its cap on requests in flight (None: none)."""

    prompts: int
    cap: int | None


def shares(num_prompts: int, max_concurrency: int | None, k: int) -> list[Share]:
    """Each of ``k`` engines' :class:`Share` of a run (module docstring)."""
    if max_concurrency is None:
        return [Share(n, None) for n in deal(num_prompts, k)]
    caps = deal(max_concurrency, k)
    return [Share(n, c if c else None) for n, c in zip(proportional(num_prompts, caps), caps,
                                                       strict=True)]


@dataclass(frozen=True)
class EngineRun:
    """One simulated engine: its finished requests, the engine, the end of its client's last
    sleep, and how many engines it stands for."""

    reqs: list[Request]
    engine: ReplicaEngine
    end_min_s: float
    weight: int


def _tiles(runs: Sequence[EngineRun]) -> list[int]:
    """How many times each run's requests count in the pooled percentiles: its weight over the
    weights' common divisor (engines of one share only: each counted once, so the pooled
    percentiles are exactly that engine's)."""
    g = math.gcd(*(r.weight for r in runs))
    return [r.weight // g for r in runs]


def _pooled_itl(runs: Sequence[EngineRun]) -> EngineStats:
    """Every engine's token-gap record as one, each weighted as :func:`_tiles` says;
    ``preemptions``: every engine's."""
    out = EngineStats()
    for run, tile in zip(runs, _tiles(runs), strict=True):
        st = run.engine.stats
        out.itl_segments.extend((a, b, n, d * tile) for a, b, n, d in st.itl_segments)
        out.itl_single.extend(st.itl_single * tile)
        out.preemptions += st.preemptions * run.weight
    return out


class _Pooled:
    """What :func:`fleetplan.replica.protocol.itl_stats` reads of an engine: its stats."""

    def __init__(self, stats: EngineStats) -> None:
        self.stats = stats


def pooled_metrics(runs: Sequence[EngineRun], itl_stats: Callable[[Any], tuple[float, ...]]
                   ) -> dict[str, float]:
    """vLLM's benchmark metrics of a run served by several engines (as
    :func:`fleetplan.replica.protocol.run_metrics` computes them for one; ``itl_stats``: its
    inter-token gap statistics, :func:`fleetplan.replica.protocol.itl_stats`)."""
    ttft, tpot, outs_all = [], [], 0
    n_reqs, end = 0, 0.0
    for run, tile in zip(runs, _tiles(runs), strict=True):
        outs = np.array([r.output_tokens for r in run.reqs])
        fin = np.array([r.finish_s for r in run.reqs])
        first = np.array([r.first_token_s for r in run.reqs])
        lag_first, lag_last = client_lags(first, fin, run.engine.params)
        first, fin = first + lag_first, fin + lag_last
        t = (first - np.array([r.arrival_s for r in run.reqs])) * 1e3
        multi = outs > 1
        p = (fin[multi] - first[multi]) / (outs[multi] - 1) * 1e3
        ttft.append(np.tile(t, tile))
        tpot.append(np.tile(p, tile))
        outs_all += int(outs.sum()) * run.weight
        n_reqs += len(run.reqs) * run.weight
        end = max(end, float(fin.max()), run.end_min_s)
    tt, tp = np.concatenate(ttft), np.concatenate(tpot)
    out = {
        "request_throughput": n_reqs / end, "output_throughput": outs_all / end,
        "ttft_mean_ms": float(tt.mean()), "ttft_p50_ms": float(np.percentile(tt, 50)),
        "ttft_p90_ms": float(np.percentile(tt, 90)), "ttft_p99_ms": float(np.percentile(tt, 99)),
        "duration_s": end,
    }
    ok = tp.size > 0
    out["tpot_mean_ms"] = float(tp.mean()) if ok else math.nan
    out["tpot_p50_ms"] = float(np.percentile(tp, 50)) if ok else math.nan
    out["tpot_p99_ms"] = float(np.percentile(tp, 99)) if ok else math.nan
    pooled = _pooled_itl(runs)
    out["itl_mean_ms"], out["itl_p50_ms"], out["itl_p99_ms"] = itl_stats(_Pooled(pooled))
    out["preemptions"] = float(pooled.preemptions)
    return out


def _dealt_lengths(request_lengths: tuple[Sequence[int], Sequence[int]],
                   parts: Sequence[Share]) -> list[tuple[list[int], list[int]]]:
    """Recorded (prompt, reply) lengths dealt in send order, round robin over the engines that
    still have prompts to take."""
    left = [s.prompts for s in parts]
    got: list[tuple[list[int], list[int]]] = [([], []) for _ in parts]
    i = 0
    for a, b in zip(request_lengths[0], request_lengths[1], strict=True):
        while not left[i % len(parts)]:
            i += 1
        j = i % len(parts)
        got[j][0].append(int(a))
        got[j][1].append(int(b))
        left[j] -= 1
        i += 1
    return got


def replay_engines(params: ReplicaParams, k: int, *, rate: float, num_prompts: int,
                   burstiness: float, max_concurrency: int | None, lengths: LengthModel,
                   seeds: Sequence[int], arrival_seed: int | None,
                   totals: tuple[int, int] | None, warm_prefix_cache: bool,
                   request_lengths: tuple[Sequence[int], Sequence[int]] | None,
                   simulate_one: Callable[..., Any], itl_stats: Callable[[Any], tuple[float, ...]],
                   metrics: Sequence[str]) -> tuple[dict[str, list[float]], float]:
    """Per-seed metrics (name -> one value per seed) and the mean preemptions of a run on
    ``k`` engines of ``params`` (module docstring); what
    :func:`fleetplan.replica.protocol.replay` averages, passing its own ``simulate_one``,
    ``itl_stats`` and ``METRICS`` (this module sits below it)."""

    parts = shares(num_prompts, max_concurrency, k)
    share_rate = rate / k if math.isfinite(rate) else rate
    dealt = _dealt_lengths(request_lengths, parts) if request_lengths is not None else None
    groups: dict[Share, int] = {}
    for s in parts:
        if s.prompts:
            groups[s] = groups.get(s, 0) + 1
    per_seed: dict[str, list[float]] = {m: [] for m in metrics}
    pre = 0.0
    for seed in seeds:
        runs: list[EngineRun] = []
        if dealt is None:
            for s, count in groups.items():
                share_totals = None if totals is None else (
                    round(totals[0] * s.prompts / num_prompts),
                    round(totals[1] * s.prompts / num_prompts))
                reqs, eng, end_min, _hit = simulate_one(
                    params, seed=seed, rate=share_rate, num_prompts=s.prompts,
                    burstiness=burstiness, max_concurrency=s.cap, lengths=lengths,
                    arrival_seed=arrival_seed, totals=share_totals,
                    warm_prefix_cache=warm_prefix_cache, request_lengths=None)
                runs.append(EngineRun(reqs, eng, end_min, count))
        else:
            for s, own in zip(parts, dealt, strict=True):
                if s.prompts:
                    reqs, eng, end_min, _hit = simulate_one(
                        params, seed=seed, rate=share_rate, num_prompts=s.prompts,
                        burstiness=burstiness, max_concurrency=s.cap, lengths=lengths,
                        arrival_seed=arrival_seed, totals=None,
                        warm_prefix_cache=warm_prefix_cache, request_lengths=own)
                    runs.append(EngineRun(reqs, eng, end_min, 1))
        m = pooled_metrics(runs, itl_stats)
        pre += m.pop("preemptions") / len(seeds)
        for key in metrics:
            per_seed[key].append(m[key])
    return per_seed, pre
