"""How precisely ``fleetplan bench`` times a server: send path, read latency, send lag.

The tests (``tests/bench/test_bench_runner.py``) assert only timing *laws* that hold on any
machine (client times never before the server's, each token event timed as itself); the
absolute figures depend on how busy the machine is, so they are measured here. Against the
suite's in-process fake server (same clock as the client):

- send path: client TTFT minus the server's (request built, written, parsed);
- ITL error: the client's inter-token time minus the server's gap between the two writes;
- send lag: the client's send time minus its seeded schedule, at ``--rate`` req/s.

    .venv/bin/python benchmarks/bench_client.py               # 200 requests at 40 req/s
    .venv/bin/python benchmarks/bench_client.py --rate 100 -n 500

On an idle machine expect a few ms of send path, well under 1 ms of ITL error, and a
median send lag under 1 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "bench"))

from bench_fake_server import FakeServer, Plan  # noqa: E402

from fleetplan.bench import BenchConfig, run_benchmark, synthetic_requests  # noqa: E402
from fleetplan.bench.runner import send_schedule  # noqa: E402
from fleetplan.workload.lengths import FixedLengths, LengthModel  # noqa: E402


def _ms(x: np.ndarray) -> str:
    return (f"median {1000 * np.median(x):.2f} ms, p95 {1000 * np.percentile(x, 95):.2f} ms, "
            f"max {1000 * x.max():.2f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=200, help="requests")
    ap.add_argument("--rate", type=float, default=40.0, help="req/s (Poisson)")
    ap.add_argument("--itl-ms", type=float, default=20.0, help="the server's inter-token delay")
    args = ap.parse_args()
    srv = FakeServer(lambda i, b: Plan(ttft_s=0.02, itl_s=args.itl_ms / 1000, tokens=8)).start()
    try:
        lm = LengthModel(input=FixedLengths(value=8), output=FixedLengths(value=8))
        reqs = synthetic_requests(args.n, lm, np.random.default_rng(0))
        cfg = BenchConfig(endpoint=srv.url, model="m", num_prompts=args.n, rate=args.rate,
                          power="none", seed=7)
        res = asyncio.run(run_benchmark(cfg, reqs))
    finally:
        srv.stop()
    by_prompt = {r.body["prompt"]: r for r in srv.records[1:]}
    send, read = [], []
    for i, req in enumerate(reqs):
        rec = by_prompt[req.prompt]
        send.append(res.ttfts[i] - (rec.t_tokens[0] - rec.t_recv))
        read.extend(np.abs(np.array(res.itls[i]) - np.diff(rec.t_tokens)))
    lag = np.array(res.start_times) - send_schedule(cfg)
    print(f"{args.n} requests at {args.rate:g} req/s against the in-process fake server")
    print(f"send path:    {_ms(np.array(send))}")
    print(f"ITL error:    {_ms(np.array(read))}")
    print(f"send lag:     {_ms(lag)}")


if __name__ == "__main__":
    main()
