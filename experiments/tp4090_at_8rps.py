"""Experiment (issue 42): the tensor-parallel RTX 4090 servers' fits and their 8 req/s runs.

The study holds back every 8 req/s run. This fits each tensor-parallel RTX 4090 configuration
of the bundled store (``fleetplan.replica.calibrate.fit_many``, as ``fleetplan calibrate``),
prints its fitted step costs and first-token delay, its in-sample errors on every run (flagged
ones marked ``F``), and an estimate of its 8 req/s run: the 16 req/s run's token totals and
burst-tail pins replayed at 8 req/s (3 length seeds). The issue quotes the one measured figure
of those runs: 7B on 4 x RTX 4090, 6.31 req/s and TPOT p50 17.6 ms.

Usage: python experiments/tp4090_at_8rps.py [--jobs N] [--drop RATE]
(``--drop 16``: fit without each configuration's 16 req/s run, as leave-one-rate-out does.)
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from fleetplan.catalog.catalog import bundled_catalog
from fleetplan.profiles.store import load_profiles
from fleetplan.replica.calibrate import fit_many, group_runs, predict_on_server
from fleetplan.validate.core import load_runs

M = ["request_throughput", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "itl_p50_ms"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--drop", type=float, default=None, help="leave this rate out of the fits")
    args = ap.parse_args()
    runs = load_runs(load_profiles())
    full = [g for g in group_runs(runs).values()
            if g[0].gpu == "RTX-4090" and g[0].gpu_count > 1]
    groups = [[r for r in g if r.request_rate != args.drop] for g in full]
    t = time.time()
    fits = fit_many(groups, jobs=args.jobs)
    print(f"{len(fits)} fits in {time.time() - t:.0f} s; columns: " + " ".join(M))
    cat = bundled_catalog()
    for g, whole, f in zip(groups, full, fits, strict=True):
        p = f.params
        print(f"{g[0].model[:28]:28s} {g[0].config:11s} c_step {p.c_step * 1e3:5.1f} ms "
              f"c_seq {p.c_seq * 1e6:4.0f} us c_prefill_tok {p.c_prefill_tok * 1e6:4.0f} us "
              f"delay {p.first_token_delay_s * 1e3:.0f} ms (sigma {p.first_token_delay_sigma:.2f})")
        for rr in f.runs:
            print(f"   {rr.request_rate:4g} {'F' if rr.flagged else ' '} "
                  + " ".join(f"{rr.error_pct.get(m, float('nan')):+6.0f}" for m in M))
        r16 = next(r for r in whole if r.request_rate == 16)
        if args.drop is not None:
            pr = predict_on_server(p, r16, catalog=cat, seeds=(0, 1, 2))
            print("   16 held out " + " ".join(
                f"{100 * (pr[m] / r16.measured[m] - 1):+6.0f}" for m in M))
        pr = predict_on_server(p, dataclasses.replace(r16, request_rate=8.0), catalog=cat,
                               seeds=(0, 1, 2))
        print(f"   8 req/s estimate: {pr['request_throughput']:.2f} req/s, TPOT p50 "
              f"{pr['tpot_p50_ms']:.1f} ms, TTFT p50 {pr['ttft_p50_ms']:.0f} ms, p99 "
              f"{pr['ttft_p99_ms']:.0f} ms")


if __name__ == "__main__":
    main()
