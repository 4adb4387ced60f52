"""Fit the protocol length model's spread (lognormal cv of input and output) to the store.

Usage: python scripts/fit_length_spread.py [--calibration FILE]
Prints the score of every grid point (mean squared log error) and the fitted pair, which
fleetplan/workload/lengths.py records as PROTOCOL_CV_INPUT / PROTOCOL_CV_OUTPUT.
"""

from __future__ import annotations

import argparse
import json

from fleetplan.profiles.store import load_profiles
from fleetplan.replica.calibration_file import load_calibration
from fleetplan.replica.lengths_fit import fit_length_spread, rmse_pct
from fleetplan.replica.params_record import ReplicaParams
from fleetplan.replica.runs import runs_from_frame


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
