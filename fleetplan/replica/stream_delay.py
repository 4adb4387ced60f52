"""The second stage of an engine-first calibration: the first-token delays the steps do not explain.

A tensor-parallel server whose all-reduces go through host memory (GeForce cards:
:func:`fleetplan.replica.priors.engine_first`) delivers its first tokens hundreds of
milliseconds to seconds later than any step schedule puts them (docs/replica-model.md, "The
tensor-parallel RTX 4090 first-token delays"). Its calibration first fits the engine's step
costs to what the engine does (:func:`fleetplan.replica.calibrate.fit_config`); here, with the
engine held fixed, the delay of a request's whole stream (``first_token_delay_s``, a median,
and ``first_token_delay_sigma``, a lognormal spread: :mod:`fleetplan.replica.delivery`) is
fitted to the TTFT figures of the same server's runs. The delay moves no step (the engine does
not wait for the client), so it can never buy a better TTFT with a slower engine: the
capacities a plan takes from the engine are the ones its engine-side figures gave.

Which runs: the server's unflagged runs, those whose first tokens are consistent with a
work-conserving server (:mod:`fleetplan.replica.runs`, ``flag_runs``). The runs flagged for
their first tokens show longer delays (seconds at 1 req/s, later in a series: the study's runs
at lower rates came later on one server), and no load variable the model knows orders them:
fitted to every run, the delay of the 7B model on 4 x RTX 4090 came out 361 ms (sigma 0.88)
against 208 ms (0.53) from the unflagged runs, and its 8 req/s TTFT p99 (held back by the
study; estimated from the 16 req/s run's tokens) 2.7 s against 0.74 s, where the measured 4
and 16 req/s runs have 3.7 and 0.73 s. One delay per server is a constant, not a law of load:
docs/replica-model.md says what that leaves open.

Main entry: :func:`fit_stream_delay`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from fleetplan.replica.measured_run import MeasuredRun
from fleetplan.replica.params_record import ReplicaParams

# the TTFT figures the delay is fitted to, and their weights (the engine fit's TTFT weights)
DELAY_WEIGHTS: dict[str, float] = {
    "ttft_mean_ms": 0.5, "ttft_p50_ms": 1.0, "ttft_p90_ms": 1.0, "ttft_p99_ms": 0.7,
}
ROBUST_SCALE = 0.25  # log-error above which the loss grows linearly (~28 %)
MIN_DELAY_S = 1e-3  # a fitted median below this is no delay (the host's lag covers ~0.1 ms)
MAX_DELAY_S = 30.0
MAX_SIGMA = 2.5
DEFAULT_MAX_NFEV = 40

Predict = Callable[[ReplicaParams, MeasuredRun], dict[str, float]]


@dataclass(frozen=True)
class StreamDelayFit:
    """The fitted stream delay (median s, lognormal sigma; 0, 0: none), its loss, and the
    loss without it."""

    median_s: float
    sigma: float
    loss: float
    loss_without: float
    nfev: int


def delay_runs(runs: Sequence[MeasuredRun]) -> list[MeasuredRun]:
    """The runs a delay is fitted to: those with at least one believed TTFT figure."""
    return [r for r in runs if any(r.measured.get(m, 0.0) > 0 for m in DELAY_WEIGHTS)]


def soft_l1(residuals: np.ndarray) -> float:
    """The summed soft-L1 loss of weighted log errors, both calibration stages' (this one and
    :func:`fleetplan.replica.calibrate.fit_config`'s): quadratic below :data:`ROBUST_SCALE`,
    linear above, so that a bimodal TTFT or a stalled server does not dominate a fit."""
    r = np.asarray(residuals, dtype=float)
    return float(np.sum(2.0 * ROBUST_SCALE**2 * (np.sqrt(1.0 + (r / ROBUST_SCALE) ** 2) - 1.0)))


def _loss(preds: Sequence[tuple[MeasuredRun, dict[str, float]]]) -> float:
    res = []
    for r, pred in preds:
        for m, w in DELAY_WEIGHTS.items():
            meas, got = r.measured.get(m, 0.0), pred.get(m, 0.0)
            if meas > 0 and got > 0 and math.isfinite(got):
                res.append(w * math.log(got / meas))
    return soft_l1(np.asarray(res)) if res else 0.0


def fit_stream_delay(params: ReplicaParams, runs: Sequence[MeasuredRun], predict: Predict, *,
                     max_nfev: int = DEFAULT_MAX_NFEV) -> StreamDelayFit:
    """Fit the stream delay of ``params`` (its engine fixed) to the TTFT figures of ``runs``
    (:func:`delay_runs`), each replayed by ``predict`` (a run on its own server, as the engine
    fit replays it). Nelder-Mead on (log median, sigma) from the median of the runs' TTFT p50
    shortfalls at no delay; kept only where it beats no delay (else 0, 0)."""
    use = delay_runs(runs)
    if not use:
        return StreamDelayFit(0.0, 0.0, 0.0, 0.0, 0)
    base = params.with_(first_token_delay_s=0.0, first_token_delay_sigma=0.0)
    preds0 = [(r, predict(base, r)) for r in use]
    loss0 = _loss(preds0)
    nfev = 1
    gaps = [(r.measured["ttft_p50_ms"] - p["ttft_p50_ms"]) / 1e3 for r, p in preds0
            if r.measured.get("ttft_p50_ms", 0.0) > 0 and p.get("ttft_p50_ms", 0.0) > 0]
    start = min(max(float(np.median(gaps)) if gaps else 0.0, 0.02), MAX_DELAY_S)

    def at(x: np.ndarray) -> ReplicaParams:
        med = float(np.clip(math.exp(x[0]), MIN_DELAY_S, MAX_DELAY_S))
        return base.with_(first_token_delay_s=med,
                          first_token_delay_sigma=float(np.clip(x[1], 0.0, MAX_SIGMA)))

    def objective(x: np.ndarray) -> float:
        p = at(x)
        return _loss([(r, predict(p, r)) for r in use])

    x0 = np.array([math.log(start), 0.5])
    simplex = np.vstack([x0, x0 + [0.7, 0.0], x0 + [0.0, 0.4]])
    sol = minimize(objective, x0, method="Nelder-Mead",
                   options={"maxfev": max_nfev, "initial_simplex": simplex,
                            "xatol": 0.01, "fatol": 1e-4})
    nfev += int(sol.nfev)
    best = at(sol.x)
    if float(sol.fun) >= loss0 or best.first_token_delay_s <= MIN_DELAY_S:
        return StreamDelayFit(0.0, 0.0, loss0, loss0, nfev)
    return StreamDelayFit(round(best.first_token_delay_s, 6),
                          round(best.first_token_delay_sigma, 4), float(sol.fun), loss0, nfev)
