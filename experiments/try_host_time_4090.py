"""Experiment (issue 42): the one-GPU RTX 4090 runs with another host time per streamed output.

The host time per streamed output (``c_deliver``, docs/replica-model.md) is one figure for every
server of the bundled store (60 us). The one-GPU RTX 4090 runs' TTFT p99 at 16 req/s is the
one its leave-one-rate-out misses most (1.5B: -24 %): does a slower host for the RTX 4090
servers (another machine than the H100 ones: their runs of 10 June 2025 interleave in time)
explain it? For each host time given, two measurements of the one-GPU RTX 4090
configurations:

- leave-one-rate-out (``fleetplan.validate.cv.leave_one_rate_out``, burst tails from the whole
  store, as ``validate --cv``) with that host time in every fit: each held-out run's error of
  throughput, TTFT p50 / p90 / p99 and TPOT p50, and their median |error|;
- with ``--choose``: the summed in-sample calibration loss of those configurations at each
  host time (:func:`fleetplan.replica.host_time.choose_host_time`, the rule
  ``calibrate --fit-host-time`` applies to a whole store).

Usage: python experiments/try_host_time_4090.py [US ...] [--choose] [--jobs 2]
(default 60 150 300; about 20 s per host time for the leave-one-rate-out, 1 min for
``--choose``, on two cores).
"""

from __future__ import annotations

import argparse
import statistics
import time

from fleetplan.profiles.store import load_profiles
from fleetplan.replica import burst_tail, calibrate, priors
from fleetplan.replica import runs as runs_mod
from fleetplan.replica.host_time import choose_host_time
from fleetplan.replica.measured_run import MeasuredRun
from fleetplan.validate import cv
from fleetplan.validate.core import load_runs

METRICS = ("request_throughput", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms")


def one_gpu_4090(runs: list[MeasuredRun]) -> list[MeasuredRun]:
    return [r for r in runs if r.gpu == "RTX-4090" and r.gpu_count == 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("us", nargs="*", type=float, default=[60.0, 150.0, 300.0])
    ap.add_argument("--choose", action="store_true", help="also the summed in-sample loss")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    runs = load_runs(load_profiles())
    for us in args.us:
        priors.C_DELIVER_S = us * 1e-6  # every prior (hence every fit) takes it
        t = time.time()
        res = cv.leave_one_rate_out(one_gpu_4090(runs), jobs=args.jobs, tail_pool=runs)
        held = [x for x in res.runs if not x.flagged]
        print(f"host time {us:g} us: {len(held)} held-out runs in {time.time() - t:.0f} s; "
              "error % of " + ", ".join(METRICS))
        for rec in held:
            print(f"  {rec.model[:30]:30s} {rec.request_rate:4g} " + " ".join(
                f"{rec.metrics[m].error_pct or 0.0:+6.1f}" for m in METRICS))
        print("  median |error| " + " ".join(
            f"{statistics.median(abs(x.metrics[m].error_pct or 0.0) for x in held):5.1f}"
            for m in METRICS), flush=True)
    if args.choose:
        tails = burst_tail.infer_burst_tails(runs, seed=runs_mod.VLLM_BENCHMARK_SEED)
        groups = list(calibrate.group_runs(
            one_gpu_4090(runs_mod.with_burst_tails(runs, tails))).values())
        choice = choose_host_time(groups, jobs=args.jobs, max_nfev=calibrate.DEFAULT_MAX_NFEV,
                                  grid=tuple(sorted({*(u * 1e-6 for u in args.us), 30e-6,
                                                     100e-6})))
        print("in-sample:", choice.summary())


if __name__ == "__main__":
    main()
