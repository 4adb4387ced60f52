"""An experiment, not adopted: a host delay on the way in (docs/replica-model.md).

Usage: python scripts/try_admission_delay.py GPU_TYPE HOST_US [--jobs N] [--fit-seeds 0,1,2]
       python scripts/try_admission_delay.py GPU_TYPE HOST_US [HOST_US ...] --in-sample
  e.g. python scripts/try_admission_delay.py RTX-4090 200
       python scripts/try_admission_delay.py RTX-4090 0 100 200 300 --in-sample

Leave-one-rate-out over the bundled store's configurations of one GPU type (refitted in every
fold, the burst tails relearned without the held-out runs, as ``fleetplan validate --cv``),
with every request of every replay reaching the client ``d = HOST_US x n x u`` later, where
``n`` is the requests in the engine when it was sent and ``u`` in [0, 1) is spread by the
golden ratio over the request index (deterministic). ``d`` shifts the first and the last
token alike: TTFT and E2E grow, TPOT does not, the engine's schedule is unchanged (a named
simplification: the request would join a later step). HOST_US 0 reproduces the committed
figures of docs/validation.md. Prints the median |error| % (throughput / TTFT p50 / p90 / p99 /
TPOT p50) and the per-run errors. ``--fit-seeds``: the length seeds every fold's fit replays
(default the calibration's, ``fleetplan.replica.calibrate.FIT_SEEDS``): the other experiment of
docs/replica-model.md's section, with HOST_US 0. ``--in-sample``: instead, calibrate every
configuration of the GPU type at each HOST_US (as ``fleetplan calibrate``) and print the summed
fit loss, one GPU and tensor-parallel apart: how ``c_deliver``'s 60 us was chosen, so a delay
the fits themselves prefer would show here (~15 s a value for RTX 4090 on 2 cores).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import fleetplan.replica.calibrate as calibrate
import fleetplan.replica.protocol as protocol
from fleetplan.profiles.store import load_profiles
from fleetplan.replica.calibration import select_runs
from fleetplan.replica.records import Request
from fleetplan.validate.core import load_runs
from fleetplan.validate.cv import leave_one_rate_out

METRICS = ("request_throughput", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms")
GOLDEN = 0.6180339887498949


def delayed_run_metrics(host_s: float):  # type: ignore[no-untyped-def]
    """``protocol.run_metrics`` with every request's tokens ``d`` later (module docstring)."""
    original = protocol.run_metrics

    def run_metrics(reqs: list[Request], engine, end_min_s: float):  # type: ignore[no-untyped-def]
        if host_s > 0:
            sent = np.array([r.arrival_s for r in reqs])
            done = np.array([r.finish_s for r in reqs])
            n = (np.searchsorted(np.sort(sent), sent, side="left")
                 - np.searchsorted(np.sort(done), sent, side="right"))
            u = ((np.arange(len(reqs)) + 1) * GOLDEN) % 1.0
            for r, d in zip(reqs, host_s * np.maximum(n, 0) * u, strict=True):
                r.first_token_s += float(d)
                r.finish_s += float(d)
        return original(reqs, engine, end_min_s)

    return run_metrics


def in_sample(gpu: str, grid: list[float], jobs: int) -> None:
    """Summed fit loss of the GPU type's configurations at each host delay of ``grid`` (us)."""
    groups = list(calibrate.group_runs([r for r in select_runs(load_profiles())
                                        if r.gpu == gpu]).values())
    for us in grid:
        protocol.run_metrics = delayed_run_metrics(us * 1e-6)
        fits = calibrate.fit_many(groups, jobs=jobs)
        one = sum(f.loss for g, f in zip(groups, fits, strict=True) if g[0].gpu_count == 1)
        tp = sum(f.loss for g, f in zip(groups, fits, strict=True) if g[0].gpu_count > 1)
        print(f"{gpu}, host delay {us:g} us: summed fit loss one GPU {one:.3f}, "
              f"tensor-parallel {tp:.3f}", flush=True)
        for g, f in zip(groups, fits, strict=True):
            print(f"  {g[0].model} {g[0].config}: {f.loss:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gpu")
    ap.add_argument("host_us", type=float, nargs="+")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--fit-seeds", default=None, help="comma-separated, e.g. 0,1,2")
    ap.add_argument("--in-sample", action="store_true",
                    help="summed calibration loss at each HOST_US instead of held-out errors")
    args = ap.parse_args()
    if args.in_sample:
        in_sample(args.gpu, args.host_us, args.jobs)
        return
    if len(args.host_us) != 1:
        ap.error("give one HOST_US (several only with --in-sample)")
    args.host_us = args.host_us[0]
    if args.fit_seeds:  # fit_config's keyword default, read by every fold (forked workers)
        seeds = tuple(int(s) for s in args.fit_seeds.split(","))
        calibrate.fit_config.__kwdefaults__["seeds"] = seeds
    protocol.run_metrics = delayed_run_metrics(args.host_us * 1e-6)  # replay reads it late
    runs = load_runs(load_profiles())
    t0 = time.perf_counter()
    res = leave_one_rate_out([r for r in runs if r.gpu == args.gpu], jobs=args.jobs,
                             tail_pool=runs)
    print(f"{args.gpu}, host delay {args.host_us:g} us per request in the engine, fit seeds "
          f"{calibrate.fit_config.__kwdefaults__['seeds']} ({time.perf_counter() - t0:.0f} s)")
    print("median |error| %: " + " / ".join(
        f"{res.summary[m].median_abs_error_pct:.1f}" for m in METRICS))
    for r in res.runs:
        print(f"  {r.model} {r.config} {r.request_rate:g}: " + " ".join(
            f"{r.metrics[m].error_pct:+.0f}" for m in METRICS))


if __name__ == "__main__":
    main()
