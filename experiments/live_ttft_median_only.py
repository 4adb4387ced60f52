"""Experiment: the live test's held-out TTFT median, fitted to every TTFT figure or the medians.

The live test (``tests/live/test_live_vllm.py``) keeps each session's result files under its
work folder (``pytest tests/live --basetemp DIR``: ``DIR/test_live_vllm_calibrate_predi0/work``,
``series-*.jsonl`` and the catalog overlay). This refits each session's calibration runs as
``scripts/live-validate`` does (``fleetplan.bench.live.analyze``: 24, 6 and 3 req/s; 12 req/s
held out), once on every TTFT figure and once with ``ttft_median_only``, and prints the fitted
overhead and the held-out TTFT median and TPOT against their bounds, and each rate's TTFT
median and p90 (the stalls). About 10 s a session on 2 cores.

Usage: python experiments/live_ttft_median_only.py DIR [DIR ...]
(a DIR is a ``--basetemp`` folder, its test folder or its ``work`` folder.)
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

LENGTHS = ("lognormal:mean=64,cv=0.5,min=8,max=400", "64")  # scripts/live-validate's defaults


def work_dir(path: Path) -> Path:
    for cand in (path, path / "work", path / "test_live_vllm_calibrate_predi0" / "work"):
        if list(cand.glob("series-*.jsonl")):
            return cand
    raise SystemExit(f"{path}: no series-*.jsonl under it")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--holdout", type=float, default=12.0)
    args = ap.parse_args()
    for d in args.dirs:
        work = work_dir(d)
        # the session's catalog overlay (the tiny model and the CPU device), as the script sets it
        os.environ["FLEETPLAN_DATA_DIR"] = str(work / "catalog")
        from fleetplan.bench.live import analyze
        from fleetplan.bench.requests import parse_length_dist
        from fleetplan.errors import FleetplanError
        from fleetplan.workload.lengths import LengthModel

        lengths = LengthModel(input=parse_length_dist(LENGTHS[0], "--input-len"),
                              output=parse_length_dist(LENGTHS[1], "--output-len"))
        series = sorted(str(p) for p in work.glob("series-*.jsonl"))
        print(f"== {d}")
        for median_only in (False, True):
            try:
                a = analyze(series, holdout_rate=args.holdout, gpu="CPU-vLLM-2vCPU",
                            gpu_count=1, lengths=lengths, ttft_median_only=median_only)
            except FleetplanError as exc:
                print(f"  {'medians' if median_only else 'all TTFT'}: refused: {exc}")
                continue
            if not median_only:
                for r in a.per_rate:
                    print(f"  {r.request_rate:g} req/s: TTFT p50 {r.measured['ttft_p50_ms']:.1f} "
                          f"ms, p90 {r.measured['ttft_p90_ms']:.1f} ms")
            c, t = a.checks["ttft_p50_ms"], a.checks["tpot_p50_ms"]
            print(f"  {'medians' if median_only else 'all TTFT'}: overhead "
                  f"{1e3 * a.params.overhead_s:.1f} ms; held-out TTFT p50 measured "
                  f"{a.measured['ttft_p50_ms']:.1f} predicted {a.predicted['ttft_p50_ms']:.1f} "
                  f"({100 * c.error:+.0f}%, bound {100 * c.bound:.0f}%); TPOT p50 "
                  f"{100 * t.error:+.0f}% (bound {100 * t.bound:.0f}%)")


if __name__ == "__main__":
    main()
