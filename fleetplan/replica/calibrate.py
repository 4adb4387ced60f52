"""Calibration: fit each configuration's step-time parameters to its measured runs.

Main entries: :func:`fit_config` (one model x configuration: simulation in the loop,
``scipy.optimize.minimize`` with Nelder-Mead on log-parameters, starting from the
first-principles prior, with a weak prior penalty so that figures the runs cannot identify stay
physical),
:func:`calibrate` (every configuration of a store, in parallel processes, plus the per-GPU
efficiency ratios used for unmeasured pairs) and :func:`calibration_json` (deterministic bytes).

What is fitted: ``c_step``, ``c_prefill_tok``, ``c_seq``, ``c_kv_tok``, ``overhead_s`` always
(the prior penalty keeps ``c_seq`` and ``c_kv_tok``, which the runs separate only weakly, near
physics); the KV capacity too when the prior leaves less than :data:`KV_FIT_BELOW` tokens (there
the runs show it: e.g. 70B fp16 on 2 x H100). Repeated runs of one rate share one replay.
The objective is the weighted log-ratio of predicted to measured metrics
(:data:`WEIGHTS`) over the configuration's unflagged runs, each replayed with its exact send
times and token totals on fixed length seeds (common random numbers: the objective is
deterministic).
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
from fleetplan.replica.priors import ideal_coefficients, prior_params
from fleetplan.replica.runs import MeasuredRun, predict_run
from fleetplan.workload.lengths import LengthModel

WEIGHTS: dict[str, float] = {
    "request_throughput": 1.0, "ttft_mean_ms": 0.5, "ttft_p50_ms": 1.0, "ttft_p90_ms": 1.0,
    "ttft_p99_ms": 0.7, "tpot_p50_ms": 1.5, "itl_p50_ms": 0.7,
}
FIT_SEEDS = (0, 1)  # the length seeds every fit replays (fleetplan calibrate --fit-seeds)
MAX_FIT_SEEDS = 16
PRIOR_SIGMA = 1.5  # weak: a factor e^1.5 ~ 4.5 away from the prior costs one unit of residual
KV_FIT_BELOW = 150_000
ROBUST_SCALE = 0.25  # log-error above which the loss grows linearly (~28 %)
KV_START_GRID: tuple[float, ...] = ()  # a grid start did not help on 70B (local optima)
# Nelder-Mead evaluations per configuration fit: 40 left the 6-7 parameter fits short of
# converged (leave-one-rate-out RTX 4090 TTFT p50 18.8 % at 40, 14.8 % at 80; docs/replica-model.md)
DEFAULT_MAX_NFEV = 80
BOUND = 3.0  # log-space bound around the prior (a factor of ~20 either way)
# a fit whose median in-sample predicted / measured ratio of one of these figures is beyond this
# factor either way is refused (_check_in_sample)
REFUSE_FACTOR = 2.0
REFUSE_METRICS = ("request_throughput", "tpot_p50_ms")
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
                f"{m} at {ratio:.3g}x the measured value (median over the {len(v)} runs it was "
                f"fitted to; limit {REFUSE_FACTOR:g}x either way): the runs contradict each "
                f"other or the replica model; measure again on a quiet machine")


def fit_config(runs: Sequence[MeasuredRun], *, lengths: LengthModel | None = None,
               seeds: Sequence[int] = FIT_SEEDS, max_nfev: int = DEFAULT_MAX_NFEV,
               prior: ReplicaParams | None = None,
               c_deliver: float | None = None,
               catalog: Catalog | None = None) -> FitResult:
    """Fit one configuration to its runs (flagged runs are skipped, and reported), its names
    read in ``catalog`` (default: the bundled one).
    ``c_deliver``: the host time per streamed output the runs' host had
    (:mod:`fleetplan.replica.delivery`; default the prior's, kept fixed by the fit)."""
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
    names = ["c_step", "c_prefill_tok", "c_seq", "overhead_s", "c_kv_tok"]
    import os as _os
    _exp = _os.environ.get("FP_EXP", "")
    _tpg = (hw.gpu_count > 1 and "GeForce" in hw.spec.vendor_name)
    weights = dict(WEIGHTS)
    if _exp and _tpg:
        tw = float(_os.environ.get("FP_TTFTW", "0"))
        for m in ("ttft_mean_ms", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms"):
            weights[m] *= tw
        if tw == 0:
            names.remove("overhead_s")
        if "extprior" in _exp:
            # per-sequence cost of a no-P2P TP step relative to one GPU's, from the 4 x RTX 3090
            # gemma-4-12B sweeps (data/external): TP2 0.843, TP4 1.30, TP8 extrapolated 2.21
            _r = {2: 0.843, 4: 1.30, 8: 2.21}[hw.gpu_count]
            tok1 = spec.flops_per_token / (hw.spec.fp16_tflops_dense * 1e12)
            prior = prior.with_(c_seq=float(tok1 * _r))
        if "sq" in _exp:
            c2 = float(_os.environ.get("FP_C2", "1e-7"))
            prior = prior.with_(c_tok2=c2)
            names.append("c_tok2")
    if prior.kv_capacity_tokens < KV_FIT_BELOW:
        names.append("kv_capacity_tokens")
    source = (f"calibrated to {len(good)} measured run(s) of {model} on {config} "
              f"(fleetplan calibrate)")
    warm: dict[str, bool | None] = {r.run_id: None for r in good}  # None: the LRU state
    x0 = np.zeros(len(names))
    nfev = 0
    # start: match the lowest-rate run's TPOT (c_step) and TTFT p50 (overhead), among the runs
    # that measured both (a run whose replies were read whole keeps only its throughput)
    timed = [r for r in good if {"tpot_p50_ms", "ttft_p50_ms"} <= r.measured.keys()]
    if good and not timed:
        raise ModelError(f"calibration of {model} on {config} refused: none of its {len(good)} "
                         "usable runs has a believable TPOT and TTFT median (left out: "
                         f"{good[0].excluded[0][1] if good[0].excluded else 'not measured'})")
    if _exp and _tpg and "lowstart" in _exp:
        timed = [r for r in runs if "itl_p50_ms" in r.measured and (
            "nobunch" not in _exp or r.measured["itl_p50_ms"] <= r.measured.get("tpot_p50_ms", 0))]
        max_nfev = int(_os.environ.get("FP_NFEV", max_nfev))
    if timed:
        low = min(timed, key=(lambda r: r.measured["itl_p50_ms"]) if (_exp and _tpg and "lowstart" in _exp) else (lambda r: r.request_rate))
        p0 = _apply(prior, names, x0, source, True)
        pr = predict_run(p0, low, lengths=lengths, seeds=seeds, warm=warm.get(low.run_id),
                         catalog=cat)
        nfev += 1
        _m = "itl_p50_ms" if (_exp and _tpg and "lowstart" in _exp) else "tpot_p50_ms"
        x0[0] = float(np.clip(math.log(low.measured[_m] / pr[_m]), -2, 2))
        p0 = _apply(prior, names, x0, source, True)
        pr = predict_run(p0, low, lengths=lengths, seeds=seeds, warm=warm.get(low.run_id),
                         catalog=cat)
        nfev += 1
        gap_s = (low.measured["ttft_p50_ms"] - pr["ttft_p50_ms"]) / 1e3
        want = max(prior.overhead_s + gap_s, prior.overhead_s / 10)
        if "overhead_s" in names:
            x0[3] = float(np.clip(math.log(want / prior.overhead_s), -2.3, 2.3))

    reps: dict[float, MeasuredRun] = {}
    for r in good:
        reps.setdefault(r.request_rate, r)
    thr_only = []
    if _exp and _tpg and "flagthr" in _exp:
        thr_only = [r for r in runs if r.flagged and r.request_rate not in reps]
        for r in thr_only:
            reps.setdefault(r.request_rate, r)
            warm[r.run_id] = None
    _fm = [m for m in _os.environ.get("FP_FLAGM", "request_throughput").split(",")]

    def residuals(x: np.ndarray) -> np.ndarray:
        p = _apply(prior, names, x, source, True)
        res = []
        preds = {rate: predict_run(p, r, lengths=lengths, seeds=seeds, warm=warm[r.run_id],
                                   catalog=cat)
                 for rate, r in reps.items()}
        for r in good:
            pred = preds[r.request_rate]
            for m, w in weights.items():
                if w == 0:
                    continue
                if m in r.measured and r.measured[m] > 0 and pred[m] > 0:
                    res.append(w * math.log(pred[m] / r.measured[m]))
                else:
                    res.append(w * 3.0)
        for r in thr_only:
            pred = preds[r.request_rate]
            for m in _fm:
                if m == "itl_p50_ms" and "nobunch" in _exp and not (
                        r.measured.get("itl_p50_ms", 1e9) <= r.measured.get("tpot_p50_ms", 0)):
                    continue
                res.append(weights[m] * math.log(pred[m] / r.measured[m]))
        if _exp and _tpg and "looseseq" in _exp:
            sig = np.full(len(names), PRIOR_SIGMA)
            sig[names.index("c_seq")] = float(_os.environ.get("FP_SEQSIG", "4"))
            res.extend(x / sig)
        else:
            res.extend(x / PRIOR_SIGMA)
        return np.asarray(res)

    _bnd = np.full(len(names), BOUND)
    if _exp and _tpg and "obound" in _exp and "overhead_s" in names:
        _bnd[names.index("overhead_s")] = math.log(10.0 / prior.overhead_s)
    if good:
        # derivative-free: the replayed metrics move in small discrete jumps (step boundaries),
        # which misleads finite-difference Jacobians
        def objective(x: np.ndarray) -> float:
            xc = np.clip(x, -_bnd, _bnd)
            r = residuals(xc)
            # soft-L1: quadratic for small log-errors, linear for gross ones (a bimodal TTFT
            # or a stalled server must not dominate the whole configuration's fit)
            robust = 2.0 * ROBUST_SCALE**2 * (np.sqrt(1.0 + (r / ROBUST_SCALE) ** 2) - 1.0)
            return float(np.sum(robust) + 10.0 * np.sum((x - xc) ** 2))

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
        x = np.clip(sol.x, -_bnd, _bnd)
        loss, nfev = float(sol.fun), nfev + int(sol.nfev)
    else:
        x, loss = x0, math.nan
    params = _apply(prior, names, x, source, bool(good))
    if good and _exp and _tpg and "stage2" in _exp:
        tm = ("ttft_mean_ms", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms")
        def loss2(y: np.ndarray) -> float:
            p2 = params.with_(overhead_s=float(prior.overhead_s * math.exp(y[0])))
            tot = 0.0
            preds = {rate: predict_run(p2, r, lengths=lengths, seeds=seeds, warm=warm.get(r.run_id),
                                       catalog=cat) for rate, r in reps.items() if not r.flagged}
            for r in good:
                for m in tm:
                    if m in r.measured and r.measured[m] > 0:
                        e = WEIGHTS[m] * math.log(preds[r.request_rate][m] / r.measured[m])
                        tot += 2.0 * ROBUST_SCALE**2 * (math.sqrt(1.0 + (e / ROBUST_SCALE) ** 2) - 1.0)
            return tot
        from scipy.optimize import minimize_scalar
        s2 = minimize_scalar(lambda y: loss2(np.array([y])), bounds=(-1.0, 6.0), method="bounded",
                             options={"maxiter": 25, "xatol": 0.02})
        params = params.with_(overhead_s=float(prior.overhead_s * math.exp(s2.x)))
        nfev += int(s2.nfev)
    ideal = ideal_coefficients(spec, hw)
    ratios = {k: getattr(params, k) / ideal[k] for k in ideal}
    ratios["kv_capacity_tokens"] = params.kv_capacity_tokens / prior.kv_capacity_tokens
    report, fitted = [], []
    for r in runs:
        pred = predict_run(params, r, lengths=lengths, seeds=seeds, catalog=cat)
        if not r.flagged:
            fitted.append((r, pred))
        share = pred.get("prefix_hit_share", 0.0)
        report.append(FitRunReport(
            run_id=r.run_id, request_rate=r.request_rate, flagged=r.flagged,
            flag_reason=r.flag_reason, used_in_fit=not r.flagged,
            warm_prefix_cache=share >= 0.5, error_pct=_errors(pred, r),
            prefix_hit_share=share))
    _check_in_sample(params, fitted)
    return FitResult(params, prior, ratios, loss, nfev, tuple(names), tuple(report))


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
