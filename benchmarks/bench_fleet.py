"""Fleet simulator speed: one hour of traffic at 50 req/s on 32 replicas, one replication.

Target (issue 4): at least 100x faster than real time on one core, i.e. under 36 s.

    .venv/bin/python benchmarks/bench_fleet.py            # least-outstanding, 1xH100-PCIe
    .venv/bin/python benchmarks/bench_fleet.py --routing slo-aware --repeat 3

Pins itself to one CPU core where the OS allows (``os.sched_setaffinity``) and limits BLAS
threads, then reports wall time, speed-up over real time and the main figures of the run.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import time  # noqa: E402

from fleetplan.fleet import simulate  # noqa: E402
from fleetplan.scenario import scenario_from_dict  # noqa: E402


def scenario(duration_s: float, rate: float, replicas: int, config: str, routing: str) -> dict:
    return {
        "model": "DeepSeek-R1-Distill-Qwen-14B",
        "classes": [{"name": "chat", "rate_rps": rate, "slo": {"ttft_p99_ms": 500}}],
        "fleet": [{"config": config, "count": replicas}],
        "routing": routing,
        "sim": {"duration_s": duration_s, "warmup_s": 60, "seed": 1, "replications": 1},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=3600.0, help="simulated seconds")
    ap.add_argument("--rate", type=float, default=50.0, help="req/s")
    ap.add_argument("--replicas", type=int, default=32)
    ap.add_argument("--config", default="1xH100-PCIe")
    ap.add_argument("--routing", default="least-outstanding")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    sc = scenario_from_dict(scenario(args.duration, args.rate, args.replicas, args.config,
                                     args.routing))
    simulate(sc.with_updates(sim={"duration_s": 120, "warmup_s": 10}))  # imports, caches
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        res = simulate(sc)
        times.append(time.perf_counter() - t0)
    best = min(times)
    c = res.classes[0]
    print(f"{args.duration:g} s at {args.rate:g} req/s on {args.replicas}x{args.config}, "
          f"{args.routing}, 1 replication, 1 core")
    print(f"requests measured: {c.requests}; P99 TTFT {c.ttft_p99_ms:.1f} ms; "
          f"utilization {res.pools[0].utilization:.2f}; overloaded {res.overloaded}")
    print(f"wall: best {best:.2f} s of {len(times)} ({', '.join(f'{t:.2f}' for t in times)}); "
          f"{args.duration / best:.0f}x real time; target < {args.duration / 100:.0f} s: "
          f"{'met' if best < args.duration / 100 else 'MISSED'}")


if __name__ == "__main__":
    main()
