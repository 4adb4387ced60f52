"""Leave-one-model-out errors of the spec path on the bundled store, before (efficiency ratios
per coefficient) and after (per-GPU-type transfer efficiencies of the bandwidth-, compute- and
interconnect-bound parts: fleetplan.replica.transfer.fit_transfer_efficiency).

Usage: python experiments/compare_transfer_efficiency.py [--seeds N]   (about 20 s with 3 seeds)
Prints the median absolute errors (percent, unflagged runs) overall and per GPU type.
"""

from __future__ import annotations

import argparse

from fleetplan.profiles.store import load_profiles
from fleetplan.replica.calibration_file import load_calibration_file
from fleetplan.validate.core import load_runs
from fleetplan.validate.spec_cv import error_quantiles, leave_one_model_out

METRICS = ("request_throughput", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    cal = load_calibration_file()
    keys = {e.key for e in cal.configs}
    runs = [r for r in load_runs(load_profiles()) if r.key in keys]
    seeds = tuple(range(args.seeds))
    print("| spec path | GPU type | n | " + " | ".join(METRICS) + " |")
    print("| --- | --- | --- |" + " --- |" * len(METRICS))
    for name, transfer in (("ratios (default)", False), ("transfer efficiencies", True)):
        res = leave_one_model_out(runs, cal.configs, seeds=seeds, transfer=transfer)
        for gpu, row in error_quantiles(res.runs, METRICS).items():
            n = row[METRICS[0]]["n"]
            cells = " | ".join(f"{row[m]['median_abs_pct']:.1f}" for m in METRICS)
            print(f"| {name} | {gpu} | {n} | {cells} |")


if __name__ == "__main__":
    main()
