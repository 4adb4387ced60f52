"""Fit the protocol length model's spread (lognormal cv of input and output) to the store.

Usage: python scripts/fit_length_spread.py [--calibration FILE]
Prints the score of every grid point (mean squared log error) and the fitted pair, which
fleetplan/workload/lengths.py records as PROTOCOL_CV_INPUT / PROTOCOL_CV_OUTPUT.

With each configuration's calibrated parameters held fixed, :func:`fit_length_spread` replays
runs over a grid of lognormal coefficients of variation and scores them:

- output spread: the request throughput at interior rates (4 and 16 req/s), which the long
  replies sent near the end of a burst decide (the run lasts until the last reply ends);
- input spread: the TTFT p90 and p99 of runs whose prompts are not in the prefix cache (the
  first, highest-rate run of a series, and configurations whose KV cache cannot keep the
  prompts), where long prompts make the slow first tokens.

Only well-fitted configurations take part (calibration loss below ``max_loss``, no flagged
run): a configuration the step model cannot describe would bias the spread. The output spread
is fitted first (at the current input spread), then the input spread.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fleetplan.profiles.store import load_profiles
from fleetplan.replica.calibration_file import load_calibration
from fleetplan.replica.measured_run import MeasuredRun
from fleetplan.replica.params_record import ReplicaParams
from fleetplan.replica.runs import predict_run, runs_from_frame
from fleetplan.workload.lengths import PROTOCOL_CV_INPUT, protocol_length_model

CV_GRID = (0.6, 0.8, 1.0, 1.25, 1.5, 1.75, 2.0)


@dataclass(frozen=True)
class SpreadFit:
    """The fitted coefficients of variation and the score of every grid point tried."""

    cv_input: float
    cv_output: float
    output_scores: dict[float, float]
    input_scores: dict[float, float]
    n_throughput_runs: int
    n_ttft_runs: int


def _score(pairs: Sequence[tuple[ReplicaParams, MeasuredRun, bool]], metrics: Sequence[str],
           cv_in: float, cv_out: float, seeds: Sequence[int]) -> float:
    lm = protocol_length_model(cv_in, cv_out)
    total, n = 0.0, 0
    for params, run, warm in pairs:
        pred = predict_run(params, run, lengths=lm, seeds=seeds, warm=warm)
        for m in metrics:
            if run.measured.get(m, 0) > 0 and pred[m] > 0:
                total += math.log(pred[m] / run.measured[m]) ** 2
                n += 1
    return total / max(n, 1)


def fit_length_spread(runs: Sequence[MeasuredRun], params: dict[tuple[str, str], ReplicaParams],
                      losses: dict[tuple[str, str], float], *, max_loss: float = 1.0,
                      grid: Sequence[float] = CV_GRID,
                      seeds: Sequence[int] = (0, 1, 2, 3, 4)) -> SpreadFit:
    """Grid-fit (cv_output, then cv_input) with the given per-configuration parameters."""
    stalled = {r.key for r in runs if r.flagged}  # a server with flagged runs misleads
    good = [r for r in runs if not r.flagged and r.key in params and r.key not in stalled
            and losses.get(r.key, math.inf) < max_loss]
    tput = []
    cold = []
    for r in good:
        p = params[r.key]
        warm = r.warm_cache()
        rates = sorted({q.request_rate for q in good if q.key == r.key})
        if rates and rates[0] < r.request_rate < rates[-1]:
            tput.append((p, r, warm))
        if not warm:
            cold.append((p, r, warm))
    out_scores = {cv: _score(tput, ["request_throughput"], PROTOCOL_CV_INPUT, cv, seeds)
                  for cv in grid}
    cv_out = min(out_scores, key=lambda k: (out_scores[k], k))
    in_scores = {cv: _score(cold, ["ttft_p90_ms", "ttft_p99_ms"], cv, cv_out, seeds)
                 for cv in grid}
    cv_in = min(in_scores, key=lambda k: (in_scores[k], k))
    return SpreadFit(float(cv_in), float(cv_out), out_scores, in_scores, len(tput), len(cold))


def rmse_pct(score: float) -> float:
    """A mean squared log error as an approximate percent error."""
    return 100.0 * (math.exp(math.sqrt(score)) - 1.0) if np.isfinite(score) else math.nan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--calibration", default=None)
    args = ap.parse_args()
    cal = load_calibration(args.calibration)
    params = {(e["model"], e["config"]): ReplicaParams.model_validate(e["params"])
              for e in cal["configs"]}
    losses = {(e["model"], e["config"]): (e["loss"] if e["loss"] is not None else 1e9)
              for e in cal["configs"]}
    fit = fit_length_spread(runs_from_frame(load_profiles().frame), params, losses)
    print(f"output cv  (request throughput at interior rates, {fit.n_throughput_runs} runs)")
    for cv, s in fit.output_scores.items():
        print(f"  cv_out={cv:<5g} msle={s:.5f} (~{rmse_pct(s):.1f}% rms)")
    print(f"input cv   (TTFT p90/p99 of cold-cache runs, {fit.n_ttft_runs} runs)")
    for cv, s in fit.input_scores.items():
        print(f"  cv_in={cv:<5g}  msle={s:.5f} (~{rmse_pct(s):.1f}% rms)")
    print(json.dumps({"cv_input": fit.cv_input, "cv_output": fit.cv_output}))


if __name__ == "__main__":
    main()
