"""Experiment (issue 42, not adopted): leave-one-rate-out over a subset of configurations with the env-gated fit variants of fleetplan/replica/calibrate.py on this branch. Usage: FP_EXP=... FP_TTFTW=... FP_FLAGM=... [FP_SEQSIG=4] [FP_FITSEEDS=0,1] python experiments/try_tp_engine_first.py tp4090 2"""
import sys, time, statistics, json
from fleetplan.profiles.store import load_profiles
from fleetplan.validate.core import load_runs
from fleetplan.validate.cv import leave_one_rate_out
sel = sys.argv[1] if len(sys.argv) > 1 else "tp4090"
runs = load_runs(load_profiles())
def pick(r):
    n, g = r.config.split("x", 1)
    if sel == "tp4090": return g == "RTX-4090" and int(n) > 1
    if sel == "4090": return g == "RTX-4090"
    if sel == "tph100": return g != "RTX-4090" and int(n) > 1
    if sel == "all": return True
    return sel in r.config or sel in r.model
mine = [r for r in runs if pick(r)]
t = time.time()
import os
fs = tuple(int(v) for v in os.environ.get("FP_FITSEEDS", "0,1").split(","))
cv = leave_one_rate_out(mine, tail_pool=runs, jobs=int(sys.argv[2]) if len(sys.argv) > 2 else 1, fit_seeds=fs)
print(f"time {time.time()-t:.0f}s")
M = ["request_throughput", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms"]
for r in cv.runs:
    if r.flagged: continue
    print(f"{r.model[:28]:28s} {r.config:11s} {r.request_rate:5g} " + " ".join(f"{r.metrics[m].error_pct:7.1f}" for m in M))
for k, s in cv.by_kind.items():
    print(k, " ".join(f"{m[:10]}={s[m].median_abs_error_pct:.1f}" for m in M), "n", s[M[0]].n)
