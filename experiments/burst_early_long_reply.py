"""Experiment (issue 42): is the 32 and 16 req/s runs' duration set by a long reply sent early?

The burst-tail pins (:mod:`fleetplan.replica.burst_tail`) are searched among the last 50
requests and fitted without the 32 req/s runs. At 32 req/s every request is sent within ~6 s,
so the reply that ends the run can be any long one. This replays every configuration's 16 and
32 req/s runs with its committed calibration (in-sample, no refit, length seed 0) with one more
pinned reply of ``L`` tokens at request ``k`` (the rest of the run's output total shared by the
others as usual) and prints the throughput error per (k, L): a single (k, L) per prompt set
that brings every server's 16 / 32 req/s throughput right would say the length model, not the
engine, sets those durations.

Usage: python experiments/burst_early_long_reply.py [--family 200:41650] [--k K ...] [--L L ...]
(about a minute per 10 (k, L) pairs on one core)
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics

from fleetplan.catalog.catalog import bundled_catalog
from fleetplan.profiles.store import load_profiles
from fleetplan.replica.calibrate import group_runs, predict_on_server
from fleetplan.replica.calibration_file import load_calibration_file
from fleetplan.replica.measured_run import MeasuredRun
from fleetplan.validate.core import load_runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--family", default="200:41650")
    ap.add_argument("--k", type=int, nargs="+", default=[5, 30, 80])
    ap.add_argument("--L", type=int, nargs="+", default=[0, 900, 1100, 1300])
    args = ap.parse_args()
    cat = bundled_catalog()
    params = {e.key: e.params for e in load_calibration_file().configs}
    sel: dict[tuple[str, str, float], MeasuredRun] = {}  # one run per configuration and rate
    for key, g in group_runs(load_runs(load_profiles())).items():
        for r in g:
            if (f"{r.num_prompts}:{r.total_input_tokens}" == args.family
                    and r.request_rate >= 16 and not r.flagged and key in params):
                sel.setdefault((*key, r.request_rate), r)
    runs = list(sel.values())
    print(f"{len(runs)} runs of prompt set {args.family}; pins {runs[0].pinned_outputs}")
    for k in args.k:
        for L in args.L:
            if L == 0 and k != args.k[0]:
                continue
            errs = []
            for r in runs:
                pins = r.pinned_outputs + (((k, L),) if L else ())
                pr = predict_on_server(params[r.key], dataclasses.replace(r, pinned_outputs=pins),
                                       catalog=cat, seeds=(0,))
                thr = pr["request_throughput"] / r.measured["request_throughput"]
                errs.append((r, 100 * (thr - 1)))
            print(f"k {k:3d} L {L:5d}: median |thr err| "
                  f"{statistics.median(abs(e[1]) for e in errs):5.1f}  " + " ".join(
                      f"{e[0].config}:{e[0].model.split('-')[-1][:4]}@{e[0].request_rate:g}:"
                      f"{e[1]:+.0f}"
                      for e in errs))


if __name__ == "__main__":
    main()
