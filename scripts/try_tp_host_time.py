"""An experiment, not adopted: a host time of their own for tensor-parallel RTX 4090 servers.

Usage: python scripts/try_tp_host_time.py HOST_US [HOST_US ...] [--cv] [--jobs N]
  e.g. python scripts/try_tp_host_time.py 60 300 600 1000 2000 --cv

Every tensor-parallel RTX 4090 configuration of the bundled store is fitted with the host time
per streamed output (``c_deliver``, :mod:`fleetplan.replica.delivery`) held at HOST_US instead
of the shared 60 us; every other server keeps 60 us. Prints, per value, the summed in-sample
calibration loss of those configurations (the way docs/replica-model.md chose the 60 us) and,
with ``--cv``, the RTX 4090 leave-one-rate-out median |error| % (throughput / TTFT p50 / p90 /
p99 / TPOT p50, every fold refitted as ``fleetplan validate --cv``) and the per-run errors.
HOST_US 60 reproduces the committed figures of docs/validation.md. docs/replica-model.md
("Tried in the fourth round") has the results.
"""

from __future__ import annotations

import argparse
import math

import fleetplan.replica.calibrate as calibrate
from fleetplan.profiles.store import load_profiles
from fleetplan.replica.calibrate import fit_many, group_runs
from fleetplan.validate.core import load_runs
from fleetplan.validate.cv import leave_one_rate_out

METRICS = ("request_throughput", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms")
_FIT_JOB = calibrate._fit_job


def tensor_parallel_rtx(config: str) -> bool:
    """Whether a configuration is 2 or more RTX 4090s (tensor-parallel over PCIe)."""
    return config.endswith("xRTX-4090") and not config.startswith("1x")


TP_HOST_S = 60e-6  # set per value before the fits (forked workers inherit it)


def tp_fit_job(args):  # type: ignore[no-untyped-def]
    """``calibrate._fit_job`` with the host time of tensor-parallel RTX 4090 fits replaced."""
    runs, lengths, max_nfev, c_deliver, seeds = args
    if tensor_parallel_rtx(runs[0].config):
        c_deliver = TP_HOST_S
    return _FIT_JOB((runs, lengths, max_nfev, c_deliver, seeds))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("host_us", type=float, nargs="+")
    ap.add_argument("--cv", action="store_true", help="also the RTX 4090 leave-one-rate-out")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    runs = load_runs(load_profiles())
    tp = [rs for key, rs in group_runs(runs).items() if tensor_parallel_rtx(key[1])]
    rtx = [r for r in runs if r.gpu == "RTX-4090"]
    global TP_HOST_S
    calibrate._fit_job = tp_fit_job
    for host_us in args.host_us:
        TP_HOST_S = host_us * 1e-6
        fits = fit_many(tp, jobs=args.jobs)
        loss = math.fsum(f.loss for f in fits if math.isfinite(f.loss))
        print(f"{host_us:g} us: summed loss of {len(tp)} tensor-parallel RTX 4090 "
              f"configurations {loss:.2f}")
        if args.cv:
            res = leave_one_rate_out(rtx, jobs=args.jobs, tail_pool=runs)
            print("  RTX 4090 leave-one-rate-out median |error| %: " + " / ".join(
                f"{res.summary[m].median_abs_error_pct:.1f}" for m in METRICS))
            for r in res.runs:
                if tensor_parallel_rtx(r.config):
                    print(f"    {r.model} {r.config} {r.request_rate:g}: " + " ".join(
                        f"{r.metrics[m].error_pct:+.0f}" for m in METRICS))


if __name__ == "__main__":
    main()
