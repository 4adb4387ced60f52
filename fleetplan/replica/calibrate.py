"""Calibration: fit each configuration's step-time parameters to its measured runs.

Main entries: :func:`fit_config` (one model x configuration: simulation in the loop,
``scipy.optimize.minimize`` with Nelder-Mead on log-parameters, starting from the
first-principles prior, with a weak prior penalty so that figures the runs cannot identify stay
physical),
:func:`calibrate` (every configuration of a store, in parallel processes, plus the per-GPU
efficiency ratios used for unmeasured pairs) and :func:`calibration_json` (deterministic bytes).

What is fitted: ``c_step``, ``c_prefill_tok``, ``c_seq``, ``c_kv_tok`` always, ``overhead_s``
but on an engine-first server (:func:`~fleetplan.replica.priors.engine_first`: tensor parallel
through host memory), whose first-token delay is fitted after the engine instead
(:mod:`fleetplan.replica.stream_delay`); the prior penalty keeps ``c_seq`` and ``c_kv_tok``,
which the runs separate only weakly, near physics. The KV capacity is fitted too when the prior
leaves less than :data:`KV_FIT_BELOW` tokens (there the runs show it: e.g. 70B fp16 on 2 x
H100). Repeated runs of one rate share one replay.
The objective is the weighted log-ratio of predicted to measured metrics
(:data:`WEIGHTS`) over the configuration's unflagged runs (an engine-first fit adds its flagged
runs' engine figures: :func:`fit_weights`), each replayed with its exact send
times and token totals on fixed length seeds (common random numbers: the objective is
deterministic), on the server it was measured on: a run ingested with engine settings or a
prefix-cache state (:attr:`MeasuredRun.server`) is replayed with those settings
(:func:`~fleetplan.replica.server_params.apply_server`) and a cold cache unless recorded
warm, so the fitted step costs describe the engine, not the settings; the study's runs, which
record neither, keep their series protocol.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize

from fleetplan._pool import pool_imap
from fleetplan._progress import Progress, step
from fleetplan.catalog.catalog import Catalog, bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.errors import InputError, ModelError
from fleetplan.replica.calibration_file import FitRunReport
from fleetplan.replica.params_record import ReplicaParams
from fleetplan.replica.priors import engine_first, ideal_coefficients, prior_params
from fleetplan.replica.runs import MeasuredRun, predict_run
from fleetplan.replica.server_params import apply_server
from fleetplan.replica.stream_delay import fit_stream_delay, soft_l1
from fleetplan.workload.lengths import LengthModel

WEIGHTS: dict[str, float] = {
    "request_throughput": 1.0, "ttft_mean_ms": 0.5, "ttft_p50_ms": 1.0, "ttft_p90_ms": 1.0,
    "ttft_p99_ms": 0.7, "tpot_p50_ms": 1.5, "itl_p50_ms": 0.7,
}
FIT_SEEDS = (0, 1)  # the length seeds every fit replays (fleetplan calibrate --fit-seeds)
MAX_FIT_SEEDS = 16
PRIOR_SIGMA = 1.5  # weak: a factor e^1.5 ~ 4.5 away from the prior costs one unit of residual
KV_FIT_BELOW = 150_000
KV_START_GRID: tuple[float, ...] = ()  # a grid start did not help on 70B (local optima)
# Nelder-Mead evaluations per configuration fit: 40 left the 6-7 parameter fits short of
# converged (leave-one-rate-out RTX 4090 TTFT p50 18.8 % at 40, 14.8 % at 80; docs/replica-model.md)
DEFAULT_MAX_NFEV = 80
BOUND = 3.0  # log-space bound around the prior (a factor of ~20 either way)
# a fit whose median in-sample predicted / measured ratio of one of these figures is beyond this
# factor either way is refused (_check_in_sample)
REFUSE_FACTOR = 2.0
REFUSE_METRICS = ("request_throughput", "tpot_p50_ms")
# A run flagged for its first tokens keeps its TPOT and ITL medians in an engine-first fit
# (:func:`engine_first`) where its tokens were not delivered in bunches: ITL p50 at most this
# factor x TPOT p50 (a reply whose first chunk came late carries several tokens, so its TPOT,
# which spreads the reply's time after the first token, falls below the gap between chunks:
# 7B on 4 x RTX 4090 at 1 req/s, 8.6 against 20.0 ms)
UNBUNCHED_ITL_RATIO = 1.05
# the TTFT figures beyond the median, which fit_config(ttft_median_only=True) leaves out
TAIL_TTFT = ("ttft_mean_ms", "ttft_p90_ms", "ttft_p99_ms")
RATIO_KEYS = ("c_step", "c_prefill_tok", "c_seq", "c_kv_tok", "overhead_s",
              "kv_capacity_tokens")


def check_fit_seeds(seeds: Sequence[int]) -> tuple[int, ...]:
    """``seeds`` as the tuple a fit replays: 1..:data:`MAX_FIT_SEEDS` distinct whole numbers
    0..2**32-1 (numpy's seed range); otherwise an :class:`InputError` naming the value."""
    if isinstance(seeds, str | bytes) or not isinstance(seeds, Sequence):
        raise InputError(f"fit seeds(={seeds!r}) must be a list of whole numbers")
    out = []
    for v in seeds:
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or not 0 <= v < 2**32:
            raise InputError(f"fit seed {v!r} must be a whole number from 0 to {2**32 - 1}")
        out.append(int(v))
    if not 1 <= len(out) <= MAX_FIT_SEEDS:
        raise InputError(f"fit seeds: give 1 to {MAX_FIT_SEEDS} seeds, not {len(out)}")
    if len(set(out)) != len(out):
        raise InputError(f"fit seeds {tuple(out)}: each seed at most once")
    return tuple(out)


@dataclass(frozen=True)
class FitResult:
    """The fitted parameters of one configuration and how well they match its runs."""

    params: ReplicaParams
    prior: ReplicaParams
    ratios: dict[str, float]
    loss: float
    nfev: int
    fitted: tuple[str, ...]
    runs: tuple[FitRunReport, ...] = ()
    ttft_median_only: bool = False  # fitted to the TTFT medians alone (TAIL_TTFT left out)


def fit_weights(run: MeasuredRun, first: bool) -> dict[str, float]:
    """The figures of ``run`` a fit uses, with their weights: every :data:`WEIGHTS` figure of an
    unflagged run; of a flagged run, none, or in an engine-first fit (``first``,
    :func:`engine_first`) its request throughput and, unless its tokens came in bunches
    (:data:`UNBUNCHED_ITL_RATIO`), its TPOT and ITL medians."""
    if not run.flagged:
        return dict(WEIGHTS)
    if not first:
        return {}
    out = {"request_throughput": WEIGHTS["request_throughput"]}
    tpot, itl = run.measured.get("tpot_p50_ms", 0.0), run.measured.get("itl_p50_ms", 0.0)
    if tpot > 0 and 0 < itl <= UNBUNCHED_ITL_RATIO * tpot:
        out.update(tpot_p50_ms=WEIGHTS["tpot_p50_ms"], itl_p50_ms=WEIGHTS["itl_p50_ms"])
    return out


def _apply(prior: ReplicaParams, names: Sequence[str], x: np.ndarray, source: str,
           calibrated: bool) -> ReplicaParams:
    ch: dict[str, Any] = {"source": source, "calibrated": calibrated}
    for n, v in zip(names, x, strict=True):
        base = getattr(prior, n)
        if n == "kv_capacity_tokens":
            tok = int(base * math.exp(v)) // prior.block_size * prior.block_size
            ch[n] = max(tok, prior.block_size * 4)
            ch["max_model_len"] = min(prior.max_model_len, ch[n])
        else:
            ch[n] = float(base * math.exp(v))
    return prior.with_(**ch)


def _on_server(params: ReplicaParams, run: MeasuredRun,
               catalog: Catalog) -> tuple[ReplicaParams, bool | None]:
    """The engine's ``params`` as ``run``'s server ran them (its recorded engine settings), and
    the replay's prefix cache (None: the study's series protocol; else cold unless recorded
    warm), as ``validate`` replays the same run."""
    if run.server is None:
        return params, None
    return (apply_server(params, run.server, engine_version=run.engine_version,
                         catalog=catalog), run.server.warm())


def predict_on_server(params: ReplicaParams, run: MeasuredRun, *,
                      lengths: LengthModel | None = None, seeds: Sequence[int] = (0, 1, 2),
                      catalog: Catalog) -> dict[str, float]:
    """``run`` replayed on its own server (:func:`_on_server`: its recorded engine settings and
    prefix cache) with the engine's ``params``: how a fit is judged, and how a held-out run is
    predicted."""
    on, warm = _on_server(params, run, catalog)
    return predict_run(on, run, lengths=lengths, seeds=seeds, warm=warm, catalog=catalog)


def _replay_key(run: MeasuredRun) -> tuple[float, str, bool | None]:
    """Runs of one key share one replay: the rate, and the server's settings and cache."""
    if run.server is None:
        return run.request_rate, "", None
    return run.request_rate, run.server.describe(), run.server.warm()


def _errors(pred: dict[str, float], run: MeasuredRun) -> dict[str, float]:
    return {m: 100.0 * (pred[m] - run.measured[m]) / run.measured[m]
            for m in run.measured if m in pred and run.measured[m] > 0}


def _check_in_sample(params: ReplicaParams,
                     fitted: Sequence[tuple[MeasuredRun, dict[str, float]]]) -> None:
    """Refuse (:class:`ModelError`, one line naming the configuration and the figure) a fit
    that misses the very runs it was fitted to (``fitted``: each with its prediction): the
    median over them of predicted / measured request throughput or TPOT p50 (the figures the
    step parameters set) beyond a factor :data:`REFUSE_FACTOR`. Such runs contradict each
    other (or the model), and a fit that compromises between them predicts nothing; the
    study's worst configuration is at 11.5 % (throughput) and 26.5 % (TPOT p50)."""
    logs: dict[str, list[float]] = {m: [] for m in REFUSE_METRICS}
    for r, pred in fitted:
        for m in REFUSE_METRICS:
            if r.measured.get(m, 0.0) > 0 and pred.get(m, 0.0) > 0:
                logs[m].append(math.log(pred[m] / r.measured[m]))
    for m, v in logs.items():
        if v and abs(float(np.median(v))) > math.log(REFUSE_FACTOR):
            ratio = math.exp(float(np.median(v)))
            raise ModelError(
                f"calibration of {params.model} on {params.config} refused: its fit predicts "
                f"{m} at {ratio:.3g}x the measured value (median over the {len(v)} "
                f"run{'s' if len(v) != 1 else ''} it was fitted to; limit {REFUSE_FACTOR:g}x "
                "either way): the runs contradict each other or the replica model; measure "
                "again on a quiet machine")


def fit_config(runs: Sequence[MeasuredRun], *, lengths: LengthModel | None = None,
               seeds: Sequence[int] = FIT_SEEDS, max_nfev: int = DEFAULT_MAX_NFEV,
               prior: ReplicaParams | None = None,
               c_deliver: float | None = None,
               catalog: Catalog | None = None,
               ttft_median_only: bool = False) -> FitResult:
    """Fit one configuration to its runs (flagged runs are reported, and skipped but for their
    engine figures in an engine-first fit: :func:`fit_weights`), its names
    read in ``catalog`` (default: the bundled one).
    ``c_deliver``: the host time per streamed output the runs' host had
    (:mod:`fleetplan.replica.delivery`; default the prior's, kept fixed by the fit).
    ``ttft_median_only``: of the TTFT figures, fit the medians alone (:data:`TAIL_TTFT` left
    out), for a server whose host stalls its first tokens in a way no step explains
    (``scripts/live-validate --ttft-median-only``, docs/live-validation.md)."""
    if not runs:
        raise ModelError("no runs to calibrate from")
    model, config = runs[0].model, runs[0].config
    if any(r.key != (model, config) for r in runs):
        raise ModelError("fit_config takes the runs of one model x configuration")
    cat = catalog if catalog is not None else bundled_catalog()
    spec, hw = cat.model(model), HardwareConfig.parse(config, cat)
    # the server's engine limits follow the vLLM version its runs recorded (one version, else
    # the default: fleetplan.replica.priors.DEFAULT_ENGINE_VERSION)
    versions = {r.engine_version for r in runs}
    version = versions.pop() if len(versions) == 1 else None
    prior = prior or prior_params(spec, hw, engine_version=version)
    if c_deliver is not None:
        prior = prior.with_(c_deliver=float(c_deliver))
    good = [r for r in runs if not r.flagged]
    first = engine_first(hw)
    weights = {r.run_id: fit_weights(r, first) for r in runs}
    if ttft_median_only:
        weights = {k: {m: w for m, w in v.items() if m not in TAIL_TTFT}
                   for k, v in weights.items()}
    used = [r for r in runs if weights[r.run_id]] if good else []
    names = ["c_step", "c_prefill_tok", "c_seq", "overhead_s", "c_kv_tok"]
    if first:
        names.remove("overhead_s")
    if prior.kv_capacity_tokens < KV_FIT_BELOW:
        names.append("kv_capacity_tokens")
    source = (f"calibrated to {len(good)} measured run(s) of {model} on {config} "
              f"(fleetplan calibrate)")
    x0 = np.zeros(len(names))
    nfev = 0
    # start: match the lowest-rate run's TPOT (c_step) and TTFT p50 (overhead), among the runs
    # that measured both (a run whose replies were read whole keeps only its throughput)
    timed = [r for r in good if {"tpot_p50_ms", "ttft_p50_ms"} <= r.measured.keys()]
    if first:  # the lowest-rate run whose TPOT the fit believes
        timed = [r for r in used if "tpot_p50_ms" in weights[r.run_id]
                 and {"tpot_p50_ms", "ttft_p50_ms"} <= r.measured.keys()] or timed
    if good and not timed:
        raise ModelError(f"calibration of {model} on {config} refused: none of its {len(good)} "
                         "usable runs has a believable TPOT and TTFT median (left out: "
                         f"{good[0].excluded[0][1] if good[0].excluded else 'not measured'}); "
                         "measure again on a quiet machine, with nothing buffering the stream "
                         "between the server and the client")
    if timed:
        low = min(timed, key=lambda r: r.request_rate)
        p0 = _apply(prior, names, x0, source, True)
        pr = predict_on_server(p0, low, lengths=lengths, seeds=seeds, catalog=cat)
        nfev += 1
        x0[0] = float(np.clip(math.log(low.measured["tpot_p50_ms"] / pr["tpot_p50_ms"]), -2, 2))
        p0 = _apply(prior, names, x0, source, True)
        pr = predict_on_server(p0, low, lengths=lengths, seeds=seeds, catalog=cat)
        nfev += 1
        if "overhead_s" in names:
            gap_s = (low.measured["ttft_p50_ms"] - pr["ttft_p50_ms"]) / 1e3
            want = max(prior.overhead_s + gap_s, prior.overhead_s / 10)
            x0[names.index("overhead_s")] = float(
                np.clip(math.log(want / prior.overhead_s), -2.3, 2.3))

    reps: dict[tuple[float, str, bool | None], MeasuredRun] = {}
    for r in used:
        reps.setdefault(_replay_key(r), r)

    def residuals(x: np.ndarray) -> np.ndarray:
        p = _apply(prior, names, x, source, True)
        res = []
        preds = {key: predict_on_server(p, r, lengths=lengths, seeds=seeds, catalog=cat)
                 for key, r in reps.items()}
        for r in used:
            pred = preds[_replay_key(r)]
            for m, w in weights[r.run_id].items():
                if m in r.measured and r.measured[m] > 0 and pred[m] > 0:
                    res.append(w * math.log(pred[m] / r.measured[m]))
                else:
                    res.append(w * 3.0)
        res.extend(x / PRIOR_SIGMA)
        return np.asarray(res)

    if used:
        # derivative-free: the replayed metrics move in small discrete jumps (step boundaries),
        # which misleads finite-difference Jacobians
        def objective(x: np.ndarray) -> float:
            xc = np.clip(x, -BOUND, BOUND)
            r = residuals(xc)
            # soft-L1: a bimodal TTFT or a stalled server must not dominate the fit
            return float(soft_l1(r) + 10.0 * np.sum((x - xc) ** 2))

        if "kv_capacity_tokens" in names and KV_START_GRID:
            # the KV capacity moves the queueing regime wholesale: start from the best of a grid
            i = names.index("kv_capacity_tokens")
            best = (objective(x0), x0[i])
            for f in KV_START_GRID:
                x0[i] = math.log(f)
                best = min(best, (objective(x0), x0[i]))
            x0[i] = best[1]
            nfev += len(KV_START_GRID) + 1 if KV_START_GRID else 0
        simplex = np.vstack([x0] + [x0 + 0.35 * np.eye(len(names))[i] for i in range(len(names))])
        sol = minimize(objective, x0, method="Nelder-Mead",
                       options={"maxfev": max_nfev, "initial_simplex": simplex,
                                "xatol": 0.01, "fatol": 1e-4})
        x = np.clip(sol.x, -BOUND, BOUND)
        loss, nfev = float(sol.fun), nfev + int(sol.nfev)
    else:
        x, loss = x0, math.nan
    params = _apply(prior, names, x, source, bool(good))
    if first and used:  # the second stage: the first-token delays, the engine held fixed
        delay = fit_stream_delay(
            params, good,
            lambda p, r: predict_on_server(p, r, lengths=lengths, seeds=seeds, catalog=cat))
        params = params.with_(first_token_delay_s=delay.median_s,
                              first_token_delay_sigma=delay.sigma)
        nfev += delay.nfev
    ideal = ideal_coefficients(spec, hw)
    ratios = {k: getattr(params, k) / ideal[k] for k in ideal}
    ratios["kv_capacity_tokens"] = params.kv_capacity_tokens / prior.kv_capacity_tokens
    report, fitted = [], []
    for r in runs:
        on, warm = _on_server(params, r, cat)
        pred = predict_run(on, r, lengths=lengths, seeds=seeds, warm=warm, catalog=cat)
        if not r.flagged:
            fitted.append((r, pred))
        share = pred.get("prefix_hit_share", 0.0)
        report.append(FitRunReport(
            run_id=r.run_id, request_rate=r.request_rate, flagged=r.flagged,
            flag_reason=r.flag_reason, used_in_fit=bool(used) and bool(weights[r.run_id]),
            warm_prefix_cache=share >= 0.5 if warm is None else warm,
            error_pct=_errors(pred, r),
            prefix_hit_share=share))
    _check_in_sample(params, fitted)
    return FitResult(params, prior, ratios, loss, nfev, tuple(names), tuple(report),
                     ttft_median_only)


def _fit_job(args: tuple[list[MeasuredRun], LengthModel | None, int, float | None,
                         tuple[int, ...], Catalog | None]) -> FitResult:
    runs, lengths, max_nfev, c_deliver, seeds, catalog = args
    return fit_config(runs, lengths=lengths, max_nfev=max_nfev, c_deliver=c_deliver,
                      seeds=seeds, catalog=catalog)


def group_runs(runs: Sequence[MeasuredRun]) -> dict[tuple[str, str], list[MeasuredRun]]:
    """Runs by (model, config), sorted by key and rate."""
    out: dict[tuple[str, str], list[MeasuredRun]] = {}
    for r in sorted(runs, key=lambda r: (r.model, r.config, r.request_rate, r.run_id)):
        out.setdefault(r.key, []).append(r)
    return out


def fit_many(groups: Sequence[list[MeasuredRun]], *, lengths: LengthModel | None = None,
             jobs: int | None = None, max_nfev: int = DEFAULT_MAX_NFEV,
             progress: Progress | None = None,
             step_name: str = "configuration fits",
             c_deliver: float | None = None,
             seeds: Sequence[int] = FIT_SEEDS,
             catalog: Catalog | None = None) -> list[FitResult]:
    """Fit several configurations (names of ``catalog``, default: the bundled one), in ``jobs``
    processes (default: all cores); ``progress``
    receives step ``step_name``, one unit per fitted group; ``c_deliver`` and ``seeds`` (the
    length seeds every fit replays, :func:`check_fit_seeds`) as in :func:`fit_config`, for
    every group."""
    jobs = jobs or os.cpu_count() or 1
    fit_seeds = check_fit_seeds(seeds)
    args = [(list(g), lengths, max_nfev, c_deliver, fit_seeds, catalog) for g in groups]
    results: list[FitResult] = []
    with step(progress, step_name, len(args)) as advance:
        if jobs <= 1 or len(args) <= 1:
            for a in args:
                results.append(_fit_job(a))
                advance(1)
            return results
        # biggest first keeps both cores busy to the end; Ctrl-C or an error ends the pool's
        # workers at once (fleetplan._pool), as does this process's death
        order = sorted(range(len(args)), key=lambda i: -len(args[i][0]))
        for r in pool_imap(_fit_job, [args[i] for i in order], min(jobs, len(args))):
            results.append(r)
            advance(1)
    out: list[FitResult | None] = [None] * len(args)
    for i, r in zip(order, results, strict=True):
        out[i] = r
    return [r for r in out if r is not None]


def efficiency_table(fits: Sequence[FitResult]) -> dict[str, dict[str, float]]:
    """Per GPU type: geometric mean of fitted/ideal ratios over its calibrated configs."""
    by_gpu: dict[str, list[FitResult]] = {}
    for f in fits:
        if f.params.calibrated:
            by_gpu.setdefault(HardwareConfig.split(f.params.config)[1], []).append(f)
    out: dict[str, dict[str, float]] = {}
    for gpu in sorted(by_gpu):
        fs = by_gpu[gpu]
        row = {k: float(math.exp(np.mean([math.log(f.ratios[k]) for f in fs])))
               for k in RATIO_KEYS}
        row["n_configs"] = len(fs)
        out[gpu] = row
    return out
