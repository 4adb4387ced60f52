"""A prediction read beside its evidence: what ``fleetplan predict`` shows, as a library call.

:class:`PredictRequest` is the typed argument record (model, configuration, rate, burst or
sustained load and their options); it refuses bad input when it is built, with one line
naming the field and value (``PredictRequest(..., burstiness=0)`` -> ``burstiness 0 must be
> 0``; the CLI passes its flag names in ``names``, so it says ``--burstiness 0 ...``).
:func:`run_prediction` makes the prediction (:func:`fleetplan.replica.predict.predict` or
:func:`~fleetplan.replica.predict.predict_steady`) and puts beside it what says how far to
trust it: an uncalibrated pair's 80% error bands (:mod:`fleetplan.validate.bands`), a
calibrated pair's own runs (:mod:`fleetplan.validate.own_runs`) and the profile store's
runs of exactly this burst. :class:`Prediction` is the answer; its ``to_dict()`` is the JSON
of ``fleetplan predict --format json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetplan._progress import Progress
from fleetplan._request import RequestRecord
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.catalog.models import ModelSpec
from fleetplan.context import DataContext
from fleetplan.errors import InputError
from fleetplan.profiles.record import BenchmarkRun
from fleetplan.profiles.server import ServerDescription
from fleetplan.replica.engine_defaults import intake_is_serial
from fleetplan.replica.params import ReplicaParams
from fleetplan.replica.predict import DEFAULT_SEEDS, resolve_params
from fleetplan.replica.protocol import METRICS, ReplayResult, replay
from fleetplan.replica.steady import (
    STEADY_DURATION_S,
    SteadyResult,
    arrival_span_s,
    check_prefix_cache_hit,
    steady_state,
)
from fleetplan.validate.own_runs import OwnRuns

BURST_NOTE = (
    "the rate is a burst of num_prompts requests that the server then drains, not "
    "sustained load; use --steady for the sustained behaviour used in planning. The bundled "
    "runs after the first of each series found their prompts in vLLM's prefix cache: "
    "--arrival-seed 42 --warm-prefix-cache replays them as measured"
)
MAX_BURST_PROMPTS = 100_000  # a burst is replayed request by request (100,000: ~20 s a seed)
DEFAULT_NUM_PROMPTS = 200  # the bundled runs' burst
MAX_SEEDS = 100
MAX_ARRIVAL_SEED = 2**32 - 1  # numpy's legacy generator, as vLLM seeds it

#: How ``fleetplan predict`` names each field in its one-line errors (its flags).
CLI_NAMES = {"model": "--model", "model_config": "--model-config", "rate": "--rate",
             "steady": "--steady", "num_prompts": "--num-prompts", "seeds": "--seeds",
             "burstiness": "--burstiness", "max_concurrency": "--max-concurrency",
             "arrival_seed": "--arrival-seed", "warm_prefix_cache": "--warm-prefix-cache",
             "prefix_cache_hit": "--prefix-cache-hit", "engine_version": "--engine-version",
             "efficiency": "--efficiency"}


@dataclass(frozen=True, kw_only=True)
class PredictRequest(RequestRecord):
    """One prediction asked for: ``model`` (a catalog name or a
    :class:`~fleetplan.catalog.models.ModelSpec`; None: the model of the context's
    ``model_configs``) on ``config`` at ``rate`` req/s.

    A burst (``steady=False``, vLLM's benchmark protocol) takes ``num_prompts`` (default 200,
    at most 100,000), ``seeds`` (how many length seeds to average over, default 5),
    ``arrival_seed`` (vLLM's ``--seed``: its exact send times), ``max_concurrency`` and
    ``warm_prefix_cache``. Sustained load (``steady=True``, what planning uses) takes
    ``prefix_cache_hit`` (the share of each prompt you assume cached, default 0) and refuses
    the burst's options rather than ignore them. ``engine_version``, ``efficiency``,
    ``calibration``: as :func:`fleetplan.replica.predict.resolve_params`. ``names``: how the
    errors call each field (default its own name; the CLI passes :data:`CLI_NAMES`).
    ``server``: the engine settings the server runs with
    (:class:`~fleetplan.profiles.server.ServerDescription`, e.g. ``max_num_seqs``; mapped onto
    the parameters by :func:`~fleetplan.validate.server_params.apply_server`); its
    ``enable_prefix_caching=false`` refuses ``warm_prefix_cache`` and a ``prefix_cache_hit``
    above 0, as does an ``engine_version`` that serves the model without a prefix cache (a
    latent-attention model on vLLM 0.7.1-0.7.3, :mod:`fleetplan.replica.mla_serving`). Its
    GPU, count and parallel sizes are merged into ``config`` by the caller
    (:meth:`~fleetplan.profiles.server.ServerDescription.config_name`).
    """

    config: str
    rate: float
    model: str | ModelSpec | None = None
    steady: bool = False
    num_prompts: int | None = None
    burstiness: float = 1.0
    max_concurrency: int | None = None
    seeds: int | None = None
    arrival_seed: int | None = None
    warm_prefix_cache: bool = False
    prefix_cache_hit: float | None = None
    calibration: str | Path | None = None
    engine_version: str | None = None
    efficiency: str = "auto"
    server: ServerDescription | None = None

    def __post_init__(self) -> None:
        n = self.name
        for key, low, high in (("num_prompts", 1, None), ("seeds", 1, MAX_SEEDS),
                               ("max_concurrency", 1, None),
                               ("arrival_seed", 0, MAX_ARRIVAL_SEED)):
            v = getattr(self, key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < low
                                  or (high is not None and v > high)):
                within = f"{low} to {high}" if high is not None else f">= {low}"
                raise InputError(f"{n(key)} {v!r} must be a whole number {within}")
        if not self.burstiness > 0:
            raise InputError(f"{n('burstiness')} {self.burstiness!r} must be > 0")
        if self.steady:
            self._check_steady()
        elif self.num_prompts is not None and self.num_prompts > MAX_BURST_PROMPTS:
            raise InputError(f"{n('num_prompts')} {self.num_prompts}: at most "
                             f"{MAX_BURST_PROMPTS:,} requests in a burst (it is replayed "
                             "request by request)")
        if self.prefix_cache_hit is not None:
            check_prefix_cache_hit(self.prefix_cache_hit, n("prefix_cache_hit"))
            if not self.steady:
                raise InputError(f"{n('prefix_cache_hit')} applies to {n('steady')}; a burst "
                                 f"replay takes {n('warm_prefix_cache')} (the whole prompt "
                                 "cached)")
        if self.server is not None:
            self.server.check_modelled()
            no_cache = self.server.engine_args.get("enable_prefix_caching") is False
            if no_cache and (self.warm_prefix_cache or (self.prefix_cache_hit or 0) > 0):
                flag = n("warm_prefix_cache" if self.warm_prefix_cache else "prefix_cache_hit")
                raise InputError(f"{flag} contradicts {self.server.name('engine_args')} "
                                 "enable_prefix_caching=false: a server without prefix caching "
                                 "never serves a prompt from it")
        if self.engine_version is not None:
            from fleetplan.replica.engine_defaults import engine_defaults

            engine_defaults(self.engine_version)  # an unknown version is an error, not a note

    def _check_steady(self) -> None:
        from fleetplan.workload.arrivals import MAX_ARRIVALS

        n = self.name
        span = arrival_span_s(STEADY_DURATION_S)
        top = MAX_ARRIVALS / span
        if self.rate > top:
            raise InputError(f"{n('rate')} {self.rate:g}: a sustained load is simulated request "
                             f"by request; at most {int(top):,} req/s with {n('steady')} "
                             f"({MAX_ARRIVALS:,} arrivals in its {span:g} s)")
        burst_only = [n(key) for key, given in (
            ("num_prompts", self.num_prompts is not None), ("seeds", self.seeds is not None),
            ("arrival_seed", self.arrival_seed is not None),
            ("max_concurrency", self.max_concurrency is not None),
            ("warm_prefix_cache", self.warm_prefix_cache)) if given]
        if burst_only:
            hint = (f" (use {n('prefix_cache_hit')} 1)"
                    if burst_only[0] == n("warm_prefix_cache") else "")
            raise InputError(f"{burst_only[0]} applies to a burst replay, not to "
                             f"{n('steady')}{hint}")


@dataclass(frozen=True)
class Prediction:
    """A prediction and what says how far to trust it.

    ``result``: a :class:`~fleetplan.replica.protocol.ReplayResult` (burst) or a
    :class:`~fleetplan.replica.steady.SteadyResult` (``request.steady``). ``bands``: the
    ``*_band`` fields and ``band_basis`` of an uncalibrated pair (empty when calibrated).
    ``own_runs``: how a calibrated pair's fit reproduces its own runs (None when uncalibrated).
    ``measured_runs``: the store's runs of exactly this burst, oldest first (none for steady).
    """

    request: PredictRequest
    params: ReplicaParams
    result: ReplayResult | SteadyResult
    bands: dict[str, Any]
    own_runs: OwnRuns | None
    measured_runs: tuple[BenchmarkRun, ...] = ()
    #: a calibrated pair whose model or GPU the user's catalog gives other figures: what of
    #: those figures the prediction does not use (None otherwise)
    spec_note: str | None = None
    #: where the model's architecture comes from (a catalog row, a user's config.json, the
    #: bundled library of config.json: its spec's ``source``)
    model_source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``fleetplan predict --format json``."""
        head: dict[str, Any] = {"model": self.params.model, "config": self.params.config,
                                "calibrated": self.params.calibrated,
                                "params_source": self.params.source}
        if self.own_runs is not None:
            head["own_runs"] = self.own_runs.to_dict()
        if self.spec_note is not None:
            head["spec_note"] = self.spec_note
        if self.model_source is not None:
            head["model_source"] = self.model_source
        if isinstance(self.result, SteadyResult):
            return {**head, "mode": "steady", **self.result.to_dict(), **self.bands}
        return {**head, "mode": "burst", **self.result.to_dict(), **self.bands,
                "note": BURST_NOTE,
                **({"measured_runs": [measured_dict(r) for r in self.measured_runs]}
                   if self.measured_runs else {})}


def calibrated_spec_note(calibrated: bool, config: str,
                         replaced: dict[str, str]) -> str | None:
    """For a calibrated configuration whose model or GPU a user's catalog gives other figures:
    which of them the calibration overrules (``replaced``: :meth:`Catalog.replaced`)."""
    if not calibrated or not replaced:
        return None
    power = " (the GPU row's power figures are used)" if "gpu" in replaced else ""
    return (f"{config} is calibrated to measured runs: its speed and KV capacity come from that "
            f"fit, not from {' or '.join(replaced.values())}{power}")


def run_prediction(request: PredictRequest, *, context: DataContext | None = None,
                   progress: Progress | None = None) -> Prediction:
    """The prediction ``request`` asks for, read through ``context`` (default: the bundled
    catalog and the usual files), with its bands, own runs and measured runs. ``progress``
    receives a sustained run's engine preparation
    (:func:`fleetplan.replica.steady.steady_state`)."""
    ctx = context if context is not None else DataContext()
    model = request.model if request.model is not None else ctx.model
    if model is None:
        raise InputError(f"{request.name('model')} or {request.name('model_config')} is "
                         "required (a catalog model name, or a Hugging Face config.json)")
    # the request's calibration, else the context's, else the default one
    cal = request.calibration if request.calibration is not None else ctx.calibration
    params = resolve_params(model, request.config, calibration=cal, context=ctx,
                            engine_version=request.engine_version,
                            efficiency=request.efficiency)
    own = _own_runs(params, cal)
    if request.server is not None and request.server.engine_args:
        from fleetplan.validate.server_params import apply_server

        cat = (ctx.catalog.extend(models=[model]) if isinstance(model, ModelSpec)
               else ctx.catalog)
        params = apply_server(params, request.server, engine_version=request.engine_version,
                              catalog=cat)
    if not params.prefix_caching and (request.warm_prefix_cache
                                      or (request.prefix_cache_hit or 0) > 0):
        # the release forces the prefix cache off (fleetplan.replica.mla_serving), as a server
        # started with enable_prefix_caching=false has none: the question contradicts itself
        flag = request.name("warm_prefix_cache" if request.warm_prefix_cache
                            else "prefix_cache_hit")
        # the release comes from the request, else from the runs a calibration was fitted to
        given = (f"{request.name('engine_version')} {request.engine_version}"
                 if request.engine_version else f"the calibration of {params.config}")
        raise InputError(f"{flag} contradicts {given}: that vLLM release serves "
                         f"{params.model}'s latent attention without a prefix cache "
                         "(docs/engine-defaults.md)")
    note = calibrated_spec_note(params.calibrated, params.config,
                                ctx.catalog.replaced(params.model,
                                                     HardwareConfig.split(params.config)[1]))
    spec = model if isinstance(model, ModelSpec) else ctx.catalog.model(model)
    source, mla = spec.source, spec.is_mla
    if request.steady:
        sres = steady_state(params, rate=request.rate, burstiness=request.burstiness,
                            prefix_cache_hit=request.prefix_cache_hit or 0.0,
                            progress=progress)
        bands = _bands(params, {k: v for k, v in sres.to_dict().items()
                                if isinstance(v, int | float)}, mla=mla)
        return Prediction(request, params, sres, bands, own, spec_note=note,
                          model_source=source)
    res = replay(params, rate=request.rate,
                 num_prompts=(DEFAULT_NUM_PROMPTS if request.num_prompts is None
                              else request.num_prompts),
                 burstiness=request.burstiness, max_concurrency=request.max_concurrency,
                 seeds=(DEFAULT_SEEDS if request.seeds is None
                        else tuple(range(request.seeds))),
                 arrival_seed=request.arrival_seed,
                 warm_prefix_cache=request.warm_prefix_cache,
                 # a release whose server takes a burst in one request at a time (0.5.x)
                 serial_intake=request.max_concurrency is None and intake_is_serial(
                     request.engine_version
                     or (request.server.engine_version if request.server else None)))
    bands = _bands(params, {k: res.metrics[k].mean for k in METRICS}, mla=mla)
    # the store's runs beside it were served with their own settings, not the stated ones
    measured = [] if request.server is not None and request.server.engine_args else (
        measured_runs(params.model, params.config, request.rate, res.num_prompts,
                      request.burstiness, request.max_concurrency, store=ctx.store))
    return Prediction(request, params, res, bands, own, tuple(measured), note, source)


def measured_runs(model: str, config: str, rate: float, num_prompts: int, burstiness: float,
                  max_concurrency: int | None, *,
                  store: str | Path | None = None) -> list[BenchmarkRun]:
    """The profile store's runs (``store``, a data context's, else the default store) of exactly
    this burst (model, configuration, rate, prompts, burstiness, concurrency cap), oldest
    first: what the prediction can be read beside."""
    from fleetplan.profiles.store import load_profiles

    out = [r for r in load_profiles(default=store).runs()
           if r.model == model and r.config == config and r.request_rate == rate
           and r.num_prompts == num_prompts and r.burstiness == burstiness
           and (r.max_concurrency or None) == max_concurrency]
    return sorted(out, key=lambda r: (r.date or "", r.run_id))


def measured_dict(run: BenchmarkRun) -> dict[str, object]:
    """A measured run beside the prediction (``measured_runs`` of the JSON): its id, where it
    comes from and the predicted metrics it has."""
    return {"run_id": run.run_id, "source_file": run.source_file, "date": run.date,
            **{k: getattr(run, k) for k in METRICS if getattr(run, k, None) is not None}}


def _own_runs(params: ReplicaParams, calibration: str | Path | None) -> OwnRuns | None:
    """How a calibrated pair's fit reproduces its own runs (none for an uncalibrated one)."""
    if not params.calibrated:
        return None
    from fleetplan.replica.calibration_file import load_calibration_file
    from fleetplan.validate.own_runs import own_runs

    return own_runs(load_calibration_file(calibration).entry(params.model, params.config))


def _bands(params: ReplicaParams, metrics: dict[str, float], *, mla: bool = False
           ) -> dict[str, Any]:
    """The ``*_band`` fields of an uncalibrated prediction (none when calibrated; ``mla``: of
    a model of multi-head latent attention)."""
    if params.calibrated:
        return {}
    from fleetplan.catalog.hardware import HardwareConfig
    from fleetplan.validate.bands import prediction_bands

    return prediction_bands(HardwareConfig.split(params.config)[1], metrics,
                            config=params.config, moe=params.is_moe, mla=mla)
