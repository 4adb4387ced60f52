"""Speed of the replica model (run on demand; never a timed assertion in tests).

Usage: python benchmarks/bench_replica.py [--calibrate] [--fleet]
Measures, on one core unless said otherwise:
- one replay of a 200-prompt run (1 length seed, and the default 5), best of 5 repeats;
- steady_state at a low and a near-capacity rate (600 s simulated), on the compiled engine
  (the first call, Numba's compile or its cached code included, is timed apart) and on the
  SimPy reference engine (``engine="simpy"``), best of 5;
- with --fleet: one hour of 50 req/s on 32 replicas in one SimPy environment (the fleet
  simulator's load pattern: a least-outstanding router calling submit);
- with --calibrate: calibrating every configuration of the bundled store (2 processes),
  written to a temporary file.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time

import numpy as np
import simpy

from fleetplan.profiles.store import load_profiles
from fleetplan.replica import ReplicaEngine, Request, replay, replica_params
from fleetplan.replica.calibration import calibrate_store, write_calibration
from fleetplan.replica.steady import steady_state
from fleetplan.workload.lengths import protocol_length_model

MODEL, CONFIG = "DeepSeek-R1-Distill-Qwen-14B", "1xH100-PCIe"


def best_of(fn, n: int = 5) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def fleet_hour(params) -> dict[str, float]:
    env = simpy.Environment()
    engines = [ReplicaEngine(env, params, record_itl=False) for _ in range(32)]
    rng = np.random.default_rng(0)
    n = 50 * 3600
    arr = np.cumsum(rng.exponential(1 / 50, n))
    ins, outs = protocol_length_model().sample(n, rng)

    def source(env):
        for i in range(n):
            yield env.timeout(arr[i] - env.now)
            eng = min(engines, key=lambda e: e.outstanding)
            eng.submit(Request(i, env.now, int(ins[i]), int(outs[i])))

    env.process(source(env))
    t = time.perf_counter()
    env.run()
    wall = time.perf_counter() - t
    return {"fleet_hour_50rps_32replicas_s": wall,
            "fleet_requests_finished": sum(e.stats.finished for e in engines)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--calibrate", action="store_true")
    ap.add_argument("--fleet", action="store_true")
    args = ap.parse_args()
    p = replica_params(MODEL, CONFIG)
    out: dict[str, object] = {"config": f"{MODEL} on {CONFIG}", "cpus": os.cpu_count()}
    for rate in (1.0, 16.0, 32.0):
        out[f"replay_200_prompts_1_seed_at_{rate:g}rps_s"] = best_of(
            lambda r=rate: replay(p, rate=r, seeds=(0,)))
        out[f"replay_200_prompts_5_seeds_at_{rate:g}rps_s"] = best_of(
            lambda r=rate: replay(p, rate=r))
    t = time.perf_counter()
    steady_state(p, rate=1.0, duration_s=60, warmup_s=10)
    out["steady_state_first_call_s"] = time.perf_counter() - t  # compile, or load the cached code
    for rate in (2.0, 15.0):
        res = steady_state(p, rate=rate)
        out[f"steady_state_600s_at_{rate:g}rps_s"] = best_of(lambda r=rate: steady_state(p, rate=r))
        out[f"steady_state_600s_at_{rate:g}rps_simpy_s"] = best_of(
            lambda r=rate: steady_state(p, rate=r, engine="simpy"))
        out[f"steady_state_600s_at_{rate:g}rps_status"] = res.status.value
    if args.fleet:
        out.update(fleet_hour(p))
    if args.calibrate:
        t = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        cal = calibrate_store(load_profiles(), jobs=2)
        out["calibrate_store_2_processes_s"] = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # CPU the two workers used: on an otherwise idle 2-core machine the wall time is about
        # half of it (the other sessions on a shared machine stretch the wall time)
        out["calibrate_store_worker_cpu_s"] = (after.ru_utime + after.ru_stime
                                               - before.ru_utime - before.ru_stime)
        with tempfile.TemporaryDirectory() as d:
            write_calibration(cal, os.path.join(d, "calibration.json"), merge=False)
        out["calibrated_configs"] = len(cal.fits)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
