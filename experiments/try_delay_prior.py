"""Experiment (issue 42): a kind-level prior on the first-token delay, under leave-one-rate-out.

Leave-one-rate-out of the tensor-parallel RTX 4090 runs (``fleetplan.validate.cv``) with the
delay stage of each fold's fit (``fleetplan.replica.stream_delay.fit_stream_delay``) replaced by
a penalised one: its loss plus ``W x ((ln median - ln m0)^2 + (sigma - s0)^2)``, where ``m0`` is
the geometric mean and ``s0`` the mean of the *other* tensor-parallel RTX 4090 servers'
committed delays (``data/calibration.json``), and the delay is always kept. ``W`` 0 runs the
code as it is. Prints each held-out run's errors (throughput, TTFT p50 / p90 / p99, TPOT p50)
and their medians. Result (6 Dec 2026, docs/replica-model.md): not adopted.

Usage: python experiments/try_delay_prior.py [W]   (about 20 s)
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from fleetplan.profiles.store import load_profiles
from fleetplan.replica import calibrate
from fleetplan.replica import stream_delay as sd
from fleetplan.replica.measured_run import MeasuredRun
from fleetplan.replica.params_record import ReplicaParams
from fleetplan.validate import cv
from fleetplan.validate.core import load_runs

M = ("request_throughput", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms")
CAL = Path(__file__).resolve().parents[1] / "data" / "calibration.json"


def main(weight: float) -> None:
    delays = {(e["model"], e["config"]): (e["params"]["first_token_delay_s"],
                                          e["params"]["first_token_delay_sigma"])
              for e in json.loads(CAL.read_text())["configs"]
              if e["params"].get("first_token_delay_s")}

    def fit(params: ReplicaParams, runs: Sequence[MeasuredRun], predict: sd.Predict, *,
            max_nfev: int = sd.DEFAULT_MAX_NFEV) -> sd.StreamDelayFit:
        use = sd.delay_runs(runs)
        others = [v for k, v in delays.items() if k != (params.model, params.config)]
        x0 = np.array([sum(math.log(a) for a, _s in others) / len(others),
                       sum(s for _a, s in others) / len(others)])
        base = params.with_(first_token_delay_s=0.0, first_token_delay_sigma=0.0)

        def at(x: np.ndarray) -> ReplicaParams:
            return base.with_(
                first_token_delay_s=float(np.clip(math.exp(x[0]), sd.MIN_DELAY_S, sd.MAX_DELAY_S)),
                first_token_delay_sigma=float(np.clip(x[1], 0.0, sd.MAX_SIGMA)))

        def objective(x: np.ndarray) -> float:
            data = sd._loss([(r, predict(at(x), r)) for r in use]) if use else 0.0
            return data + weight * float(np.sum((x - x0) ** 2))

        simplex = np.vstack([x0, x0 + [0.7, 0.0], x0 + [0.0, 0.4]])
        sol = minimize(objective, x0, method="Nelder-Mead",
                       options={"maxfev": max_nfev, "initial_simplex": simplex,
                                "xatol": 0.01, "fatol": 1e-4})
        best = at(sol.x)
        return sd.StreamDelayFit(best.first_token_delay_s, best.first_token_delay_sigma,
                                 float(sol.fun), 0.0, int(sol.nfev))

    if weight > 0:
        calibrate.fit_stream_delay = fit  # type: ignore[assignment]
    runs = load_runs(load_profiles())
    sel = [r for r in runs if r.gpu == "RTX-4090" and r.gpu_count > 1]
    res = cv.leave_one_rate_out(sel, jobs=1, tail_pool=runs)
    errs: dict[str, list[float]] = {m: [] for m in M}
    for rec in (x for x in res.runs if not x.flagged):
        e = [float(v) if m in rec.metrics and (v := rec.metrics[m].error_pct) is not None
             else math.nan for m in M]
        print(f"  {rec.model[:28]:28s} {rec.config:11s} {rec.request_rate:4g} "
              + " ".join(f"{x:+7.1f}" for x in e))
        for m, x in zip(M, e, strict=True):
            errs[m].append(abs(x))
    print(f"W {weight:g}: median |error| % " + ", ".join(
        f"{m} {statistics.median(v):.1f}" for m, v in errs.items()))


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
