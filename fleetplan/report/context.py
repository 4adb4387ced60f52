"""What a plan file does not record but a reader needs: the assumptions behind its numbers (prices
with their dates, power, grid intensity, embodied carbon, failure rates), the split of its carbon
into operational and embodied, and how accurate the replica model is on each configuration used
(from files installed with the package: the calibration file and the held-out error tables of
:mod:`fleetplan.optimize.model_band`, never the docs). For a plan file written before classes
recorded their model-error band, the band is computed here (:class:`ClassBand`, ``recorded``
false) and the page says so.

Main entry: :func:`build_context` (a plan + the scenario it was solved from ->
:class:`ReportContext`). Every figure carries its source. Without the scenario there is no
context: the report says which sections need ``--scenario``.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fleetplan.context import DataContext
from fleetplan.optimize.plan import FleetEntry, Plan
from fleetplan.scenario import Scenario
from fleetplan.scenario.served import is_multi_model, served_models

if TYPE_CHECKING:
    from fleetplan.profiles.store import ProfileStore

@dataclass(frozen=True)
class PoolAssumptions:
    """The economics of one (configuration, region, market) of the fleet, each with its
    source (``market`` ``None``: the scenario's default market)."""

    config: str
    region: str
    gpus_per_replica: int
    price_usd_per_gpu_hour: float
    price_source: str
    busy_w_per_gpu: float
    idle_w_per_gpu: float
    power_source: str
    grid_g_per_kwh: float
    grid_source: str
    embodied_g_per_gpu_hour: float
    embodied_source: str
    market: str | None = None
    # the pool's failure model (None: its replicas never fail in the simulation)
    failures_per_replica_hour: float | None = None
    replace_s: float | None = None
    down_pct: float | None = None
    failure_source: str | None = None
    # the model the pool serves: set in a plan of several models (its power is that model's)
    model: str | None = None

    @property
    def label(self) -> str:
        """The pool's configuration as the page names it (``model/config`` with a model)."""
        return self.config if self.model is None else f"{self.model}/{self.config}"


@dataclass(frozen=True)
class ValidationRow:
    """How well the replica model predicts one configuration serving the plan's model."""

    config: str
    calibrated: bool
    params_source: str
    fit_runs: int  # measured runs of this (model, config) the parameters were fitted to
    fit_ttft_p99_err_pct: float | None  # median |error| in-sample, percent
    fit_throughput_err_pct: float | None
    # held-out: the measured P99 TTFT fell within [band_lo, band_hi] x the predicted one for
    # 80% of held-out runs (fleetplan.optimize.model_band)
    band_lo: float
    band_hi: float
    band_basis: str


@dataclass(frozen=True)
class Assumption:
    name: str
    value: str
    source: str


@dataclass(frozen=True)
class ClassBand:
    """A class's 80% model-error band of its simulated P99 TTFT: as the plan records it, or,
    for a plan file written before it was recorded, computed here from the scenario."""

    name: str
    band_ms: tuple[float, float] | None
    basis: str | None
    calibrated: bool | None
    recorded: bool  # read from the plan file (False: computed by the report)


@dataclass(frozen=True)
class ReportContext:
    scenario: str  # the scenario's path as given
    model: str
    market: str
    pools: tuple[PoolAssumptions, ...]
    g_co2_operational_per_hour: float | None
    g_co2_embodied_per_hour: float | None
    validation: tuple[ValidationRow, ...]
    assumptions: tuple[Assumption, ...]
    calibration_file: str
    power_model: str = "activity"  # the scenario's power.model: how busy power is charged
    embodied_included: bool = True
    bands: tuple[ClassBand, ...] = ()

    def pool(self, p: FleetEntry) -> PoolAssumptions | None:
        return next((a for a in self.pools if (a.config, a.region, a.market, a.model)
                     == (p.config, p.region, p.market, p.model)), None)


def _economics(scenario: Scenario, config: str, region: str, market: str | None,
               store: ProfileStore, model: str | None = None) -> PoolAssumptions:
    from fleetplan.catalog.hardware import HardwareConfig
    from fleetplan.fleet.accounting import embodied_g_per_gpu_hour, power_model
    from fleetplan.scenario.reliability import entry, pool_price, resolve

    cat = scenario.data_context().catalog
    hw = HardwareConfig.parse(config, cat)
    price = cat.price(hw.gpu, scenario.market, scenario.prices_usd_per_gpu_hour)
    # a spot pool (or a market: spot entry) is priced as the simulator and the optimizer price it
    per_gpu, price_src = pool_price(
        entry(scenario.reliability, config, hw.gpu, market), hw.gpu,
        price.price_usd_per_gpu_hour,
        f"{price.market} market, {price.price_date}: {price.source}", price.market == "user",
        catalog=cat)
    power = power_model(model or scenario.one_model, config, hw.gpu, hw.gpu_count, store,
                        scenario.power_w_per_gpu, scenario.power.model, cat)
    grid = cat.grid_intensity(region, scenario.grid_g_per_kwh)
    emb, emb_src = embodied_g_per_gpu_hour(hw.gpu, scenario.embodied.include,
                                           scenario.embodied.lifetime_years, cat)
    rel = resolve(scenario.reliability, config, hw.gpu, hw.gpu_count, market)
    return PoolAssumptions(
        config=config, region=region, gpus_per_replica=hw.gpu_count,
        price_usd_per_gpu_hour=per_gpu, price_source=price_src, market=market,
        busy_w_per_gpu=power.busy_w, idle_w_per_gpu=power.idle_w, power_source=power.source,
        grid_g_per_kwh=grid.g_co2_per_kwh,
        grid_source=("scenario's grid_g_per_kwh (user-given)" if grid.year == "given"
                     else f"{grid.name} ({grid.region}), {grid.year}: {grid.source}"),
        embodied_g_per_gpu_hour=emb, embodied_source=emb_src,
        failures_per_replica_hour=rel.failures_per_hour if rel and rel.active else None,
        replace_s=rel.replace_s if rel and rel.active else None,
        down_pct=100 * rel.unavailability if rel and rel.active else None,
        failure_source=rel.source if rel and rel.active else None, model=model)


def _median_abs(values: list[float]) -> float | None:
    return statistics.median(abs(v) for v in values) if values else None


def _validation(model: str, configs: list[str], ctx: DataContext,
                label: bool = False) -> tuple[list[ValidationRow], str]:
    """Per configuration: calibrated or not, its in-sample fit, and its held-out error band, all
    from package data (the calibration file and the error tables of
    :mod:`fleetplan.optimize.model_band`), never from the docs; the catalog, store and
    calibration are ``ctx``'s (the scenario's data context)."""
    from fleetplan.optimize.model_band import pool_band
    from fleetplan.replica.calibration_file import default_calibration_path, load_calibration_file
    from fleetplan.replica.params import replica_params

    catalog = ctx.catalog
    cal = load_calibration_file(ctx.calibration)
    rows = []
    for config in configs:
        params = replica_params(model, config, catalog=catalog, calibration=ctx.calibration)
        entry = cal.entry(model, config)
        runs = [r for r in entry.runs if r.used_in_fit and not r.flagged] if entry else []
        band = pool_band(model, config, catalog, store=ctx.store, calibration=ctx.calibration)
        rows.append(ValidationRow(
            config=f"{model}/{config}" if label else config, calibrated=params.calibrated,
            params_source=params.source,
            fit_runs=len(runs),
            fit_ttft_p99_err_pct=_median_abs([r.error_pct["ttft_p99_ms"] for r in runs
                                              if "ttft_p99_ms" in r.error_pct]),
            fit_throughput_err_pct=_median_abs([r.error_pct["request_throughput"] for r in runs
                                                if "request_throughput" in r.error_pct]),
            band_lo=band.lo, band_hi=band.hi, band_basis=band.basis))
    return rows, str(default_calibration_path(ctx.calibration))


def build_context(plan: Plan, scenario: Scenario, scenario_path: str,
                  *, validation_doc: object = None) -> ReportContext:
    """The assumptions, carbon split and model accuracy behind ``plan`` solved from
    ``scenario``. ``validation_doc`` is accepted and ignored (the accuracy no longer comes from
    the docs), so callers written for the older signature still work."""
    from fleetplan.profiles.store import load_profiles
    data = scenario.data_context()  # the catalog, store and calibration solve read
    store = load_profiles(default=data.store)
    # a plan of several models: a pool is also its model's (power and accuracy are per model)
    keys = sorted({(p.config, p.region, p.market or "", p.model or "")
                   for p in plan.all_pools()})
    pools = tuple(_economics(scenario, c, r, m or None, store, model or None)
                  for c, r, m, model in keys)
    emb: float | None = None
    op: float | None = None
    if plan.g_co2_per_hour is not None and not plan.hours:
        by_key = {(a.config, a.region, a.market, a.model): a for a in pools}
        emb = sum(p.gpus * by_key[(p.config, p.region, p.market, p.model)]
                  .embodied_g_per_gpu_hour for p in plan.fleet)
        op = max(plan.g_co2_per_hour - emb, 0.0)
    several = is_multi_model(scenario)
    names = served_models(scenario)
    rows: list[ValidationRow] = []
    cal_path = ""
    for name in names:
        configs = sorted({c for c, _, _, model in keys if (model or names[0]) == name})
        if configs or not several:
            mine, cal_path = _validation(name, configs, data, label=several)
            rows += mine
    if not cal_path:
        from fleetplan.replica.calibration_file import default_calibration_path

        cal_path = str(default_calibration_path(data.calibration))
    return ReportContext(
        scenario=scenario_path, model=", ".join(names), market=scenario.market, pools=pools,
        g_co2_operational_per_hour=op, g_co2_embodied_per_hour=emb, validation=tuple(rows),
        assumptions=tuple(_assumptions(scenario, plan)), calibration_file=cal_path,
        power_model=scenario.power.model, embodied_included=scenario.embodied.include,
        bands=_bands(plan, names[0], data))


def _bands(plan: Plan, model: str, ctx: DataContext) -> tuple[ClassBand, ...]:
    """Each class's model-error band: the plan's own, else (older plan files) computed by the
    rule solve records them with (:func:`fleetplan.optimize.model_band.with_model_bands`)."""
    from fleetplan.optimize.model_band import with_model_bands

    if plan.status == "infeasible":
        return ()
    computed: Plan | None = None
    out = []
    for i, c in enumerate(plan.classes):
        if c.ttft_p99_band_ms is not None or c.calibrated is not None:
            out.append(ClassBand(c.name, c.ttft_p99_band_ms, c.band_basis, c.calibrated, True))
            continue
        computed = computed or with_model_bands(model, plan, ctx.catalog, store=ctx.store,
                                                calibration=ctx.calibration)
        w = computed.classes[i]
        out.append(ClassBand(c.name, w.ttft_p99_band_ms, w.band_basis, w.calibrated, False))
    return tuple(out)


def _assumptions(sc: Scenario, plan: Plan) -> list[Assumption]:
    """The scenario-wide assumptions (the per-pool ones are in :class:`PoolAssumptions`), each
    worded for what this scenario and plan say."""
    given = sc.model_fields_set

    def src(key: str) -> str:
        return "scenario" if key in given else "default"

    model_src = ("scenario's model_config (a Hugging Face config.json)"
                 if sc.hf_model_config is not None else "scenario")
    out = [
        Assumption("model" if len(served_models(sc)) == 1 else "models",
                   ", ".join(served_models(sc)), model_src),
        Assumption("price market", sc.market, src("market")),
        Assumption("embodied carbon",
                   f"included, amortized over {sc.embodied.lifetime_years:g} years"
                   if sc.embodied.include else "not counted (embodied.include: false: "
                   "hardware that exists already)", src("embodied")),
        _failures(sc, plan),
        _spares(sc, plan),
        Assumption("power", POWER_WORDS[sc.power.model], src("power")),
        Assumption("simulation", f"{sc.sim.duration_s:g} s per replication after "
                   f"{sc.sim.warmup_s:g} s warm-up, {sc.sim.replications} replication(s), "
                   f"seed {sc.sim.seed}", src("sim")),
        Assumption("tokens per 1M", "prompt (input) + output tokens together",
                   "fleetplan's accounting"),
    ]
    if sc.prices_usd_per_gpu_hour:
        out.append(Assumption("price overrides", ", ".join(
            f"{k} ${v:g}/GPU-h" for k, v in sorted(sc.prices_usd_per_gpu_hour.items())),
            "scenario"))
    if sc.power_w_per_gpu:
        out.append(Assumption("power overrides", ", ".join(
            f"{k} {v:g} W" for k, v in sorted(sc.power_w_per_gpu.items())), "scenario"))
    if sc.grid_g_per_kwh:
        out.append(Assumption("grid intensity overrides", ", ".join(
            f"{k} {v:g} g/kWh" for k, v in sorted(sc.grid_g_per_kwh.items())), "scenario"))
    if sc.availability:
        hourly = any(c.rate_profile_rps is not None for c in sc.classes)
        out.append(Assumption("availability", "at most " + _availability(sc.availability)
                              + (" in every hour" if hourly else ""), "scenario"))
    if sc.budget_usd_per_hour is not None:
        out.append(Assumption("budget", f"at most ${sc.budget_usd_per_hour:g} per hour",
                              "scenario"))
    if sc.carbon is not None:
        cap = (f"at most {sc.carbon.max_g_per_mtok:g} g CO2e (operational + embodied) per 1M "
               "tokens (input + output)" if sc.carbon.max_g_per_mtok is not None else
               f"at most {sc.carbon.max_kg_per_day:g} kg CO2e (operational + embodied) per day "
               "of the whole fleet")
        out.append(Assumption("carbon cap", cap, "scenario"))
    return out


POWER_WORDS = {
    "activity": "follows the work: each engine step draws between the GPU's idle and busy "
                "power by its tokens (power.model: activity)",
    "tdp": "idle + (busy \u2212 idle) \u00d7 the share of time a request is in flight, per GPU "
           "(power.model: tdp)",
}


def _failures(sc: Scenario, plan: Plan) -> Assumption:
    spot = any(p.market == "spot" for p in plan.all_pools())
    if sc.reliability is None and not spot:
        return Assumption("failure rates", "none modelled: no reliability block and no spot "
                          "pool, so replicas do not fail in the simulation", "default")
    parts = []
    for key, r in sorted((sc.reliability or {}).items()):
        rate = ("the bundled default rate" if r.failures_per_replica_hour is None
                else f"{r.failures_per_replica_hour:g} failures per replica-hour")
        down = "600 s (default)" if r.replace_s is None else f"{r.replace_s:g} s"
        parts.append(f"{key} ({r.market}): {rate}, replaced after {down}")
    if spot:
        parts.append("spot pools fail at the spot rate (their own entry, else the bundled spot "
                     "default)")
    return Assumption("failure rates", "; ".join(parts) + "; each pool's rate is in the pool "
                      "table", "scenario reliability block" if sc.reliability is not None
                      else "bundled spot default (docs/reliability.md)")


def _spares(sc: Scenario, plan: Plan) -> Assumption:
    def key(e: FleetEntry) -> tuple[object, ...]:
        return (e.model, e.config, e.region, e.market)

    churn = []
    for p in plan.fleet:
        if not p.spare:
            continue
        # a configuration's spares cover the working replicas of all its tiers and sit in
        # its strictest tier's pool (optimize/milp_solve.py)
        tiers = [q for q in plan.fleet if key(q) == key(p)]
        cover = "" if len(tiers) == 1 else (
            f", for the {sum(q.count for q in tiers) - p.spare} working replicas of its "
            f"{len(tiers)} tiers")
        churn.append(f"{p.spare} in {p.pool}{cover}")
    parts = []
    # the MILP keeps a pool's churn spares and the scenario's N+k together (milp_model.py)
    why = " and ".join(w for w, on in (("churn", sc.reliability is not None),
                                       ("redundancy", bool(sc.redundancy))) if on)
    if churn:
        parts.append(f"for {why}: " + "; ".join(churn) + " (of the pool's replicas)")
    elif any(p.spare is not None for p in plan.fleet) and sc.reliability is not None:
        parts.append("for churn: none needed at the plan's failure rates")
    if sc.redundancy:
        parts.append(f"N+{sc.redundancy}: every pool keeps {sc.redundancy} more than its load "
                     "needs (redundancy)")
    if not parts:
        return Assumption("spare replicas", "none (redundancy 0, no reliability block)",
                          "default")
    return Assumption("spare replicas", "; ".join(parts),
                      "the plan (fleet[].spare)" + ("; scenario redundancy" if sc.redundancy
                                                     else ""))


def _availability(av: dict[str, object]) -> str:
    """``{"H100-PCIe": 2, "FRA": {"RTX-4090": 1}}`` as "2 H100-PCIe GPUs, 1 RTX-4090 GPU in
    FRA"."""
    def gpus(n: object, gpu: str) -> str:
        return f"{n:g} {gpu} GPU{'' if n == 1 else 's'}" if isinstance(n, int | float) else (
            f"{n} {gpu} GPUs")

    parts = []
    for k, v in av.items():
        if isinstance(v, dict):
            parts += [f"{gpus(n, g)} in {k}" for g, n in v.items()]
        else:
            parts.append(gpus(v, k))
    return ", ".join(parts)
