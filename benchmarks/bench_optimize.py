"""Optimizer speed: the MILP on large instances, capacities cached (a fixed capacity table).

Targets (issue 7): 100 classes x 8 configurations at 300 req/s solved to a 1% gap in <= 10 s;
the 24-hour diurnal version in <= 30 s; a solve-time scaling table published in
``docs/optimizer.md`` (generated here, between the ``scaling-table`` markers).

    .venv/bin/python benchmarks/bench_optimize.py                 # the two targets, every solver
    .venv/bin/python benchmarks/bench_optimize.py --table         # + the scaling table
    .venv/bin/python benchmarks/bench_optimize.py --table --write-docs
    .venv/bin/python benchmarks/bench_optimize.py --cold          # fleetplan solve, cold + warm
    .venv/bin/python benchmarks/bench_optimize.py --cold --targets   # both, in one run

The instance mirrors the request-size-bucket formulation of prior work: 100 classes, each a
bucket of request sizes (prompt 32-4096 tokens, output 32-1024, log-spaced and shuffled), rates
drawn from a Dirichlet split of 300 req/s (seeded), SLOs from four tiers (100, 300, 1000, 5000
ms P99 TTFT), and eight configurations with catalog prices and power. Capacities come from a
fixed formula shaped like the replica model's curves (zero below a configuration's unloaded
P99, then rising and saturating; throughput inversely proportional to tokens per request):
"capacities cached" means the timing excludes capacity searches, and the MILP's solve time
depends on the table's shape (which entries are zero, how many tiers), not on its exact values.
Timings are wall seconds for building the PuLP model plus solving it, single-threaded solver.

``--cold`` times the whole of ``fleetplan solve`` instead (issue 10, target: <= 120 s cold on 2
cores, <= 10 s warm): the same 100 buckets and rates as a real scenario (each bucket a uniform
prompt and output size around its bucket's, the bundled 14B model, the eight configurations as
candidates in EU27, each class's SLO a random tier among those the fastest candidate's unloaded
P99 TTFT can reach, default ``capacity:`` and ``sim:`` settings), solved twice with local worker
processes: once on an empty temporary cache folder (every capacity search simulated), once more
on the cache it filled (capacities and the checks of the plans simulated: the rounds replay),
and once with the capacities cached but the plans' checks removed (every round simulated again,
what a solve costs at least once the scenario changed in a way that leaves its capacities).
``--workloads W`` gives the classes W distinct buckets (class i has bucket i mod W; default
100, every class its own), ``--classes N`` fewer classes.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from fleetplan.catalog.catalog import bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.optimize.milp import build_model, solve_problem
from fleetplan.optimize.problem import CommitmentMode, Demand, Limits, PlanProblem, Pool, Tier
from fleetplan.optimize.solvers import SolverSettings, solver_names

CONFIGS = ("1xH100-PCIe", "1xH100-SXM", "1xH200", "1xA100-80GB", "1xL40S", "2xRTX-4090",
           "4xRTX-4090", "2xRTX-5090")
TIERS_MS = (100.0, 300.0, 1000.0, 5000.0)
DOCS = Path(__file__).resolve().parents[1] / "docs" / "optimizer.md"
DIURNAL = tuple(0.35 + 0.65 * math.sin(math.pi * ((h - 3) % 24) / 24) ** 2 for h in range(24))


def _shape(config: str) -> tuple[float, float]:
    """(capacity at 416 tokens per request in req/s, unloaded P99 TTFT in ms) of a replica,
    scaled from the GPU's memory bandwidth and FP16 throughput (a stand-in for the replica
    model's searches)."""
    hw = HardwareConfig.parse(config)
    g = hw.spec
    bw = g.mem_bandwidth_gb_s * hw.gpu_count * (0.8 if hw.gpu_count > 1 else 1.0)
    return 2.5 * bw / 2000.0, 30.0 * (989.0 / max(g.fp16_tflops_dense * hw.gpu_count, 1.0)) ** 0.5


def instance(n_classes: int, n_configs: int, total_rps: float = 300.0, hours: int = 1,
             mode: CommitmentMode = CommitmentMode.per_hour, seed: int = 7) -> PlanProblem:
    """A bucketed instance (see the module docstring)."""
    rng = np.random.default_rng(seed)
    ins = np.geomspace(32, 4096, n_classes)
    outs = np.geomspace(32, 1024, n_classes)
    rng.shuffle(outs)
    rates = rng.dirichlet(np.ones(n_classes)) * total_rps
    configs = CONFIGS[:n_configs]
    best = min(_shape(c)[1] for c in configs)
    demands = []
    for i in range(n_classes):
        # a random tier among those the fastest configuration can meet for this prompt size
        reachable = [t for t in TIERS_MS if t > 1.2 * best * (1.0 + ins[i] / 1024.0) / 0.95]
        tier = float(reachable[int(rng.integers(len(reachable)))])
        r = float(rates[i])
        prof = tuple(r * f for f in DIURNAL) if hours == 24 else (r,)
        demands.append(Demand(f"b{i:03d}", prof, tier, None, None, float(ins[i] + outs[i])))
    pools = []
    cap: dict[tuple[str, str, Tier], float] = {}
    dyn: dict[tuple[str, str], float] = {}
    for config in configs:
        hw = HardwareConfig.parse(config)
        g = hw.spec
        price = bundled_catalog().price(hw.gpu).price_usd_per_gpu_hour * hw.gpu_count
        pools.append(Pool(config, "EU27", hw.gpu, hw.gpu_count, price, g.idle_w * hw.gpu_count,
                          242.0, g.embodied_kg_co2e * 1000 / (4 * 8760) * hw.gpu_count))
        top, floor = _shape(config)
        for i, d in enumerate(demands):
            thr = top * 416.0 / d.tokens_per_request
            f0 = floor * (1.0 + ins[i] / 1024.0)
            dyn[(d.name, config)] = (g.tdp_w - g.idle_w) * hw.gpu_count / thr
            for t_ms in TIERS_MS:
                t = Tier(t_ms)
                if t.serves(d.ttft_p99_ms, None):
                    cap[(d.name, config, t)] = (0.0 if t_ms <= f0 / 0.95 else
                                                thr * (1 - math.exp(-(t_ms - f0) / (2 * f0))))
    return PlanProblem(tuple(demands), tuple(pools), cap, dyn,
                       Limits(commitment=mode, on_demand_price_factor=1.5))


def timed(problem: PlanProblem, solver: str, gap: float = 0.01,
          time_limit_s: float = 60.0) -> dict[str, float | str | int]:
    """Wall time of :func:`solve_problem` (what ``fleetplan solve`` runs each round: the
    monolithic model, or its exact hourly decomposition), and the monolithic model's size."""
    t0 = time.perf_counter()
    model = build_model(problem)
    t1 = time.perf_counter()
    sol = solve_problem(problem, SolverSettings(solver, time_limit_s=time_limit_s, gap=gap))
    t2 = time.perf_counter()
    return {"build_s": t1 - t0, "solve_s": t2 - t1, "total_s": t2 - t1,
            "status": sol.status.value, "cost_per_hour_usd": sol.cost_per_day_usd / 24,
            "gap_achieved": "-" if sol.gap_achieved is None else f"{sol.gap_achieved:.2%}",
            "variables": len(model.prob.variables()), "constraints": len(model.prob.constraints),
            "integers": sum(v.cat != "Continuous" for v in model.prob.variables())}


def _targets(solvers: list[str]) -> None:
    checks = [("100 classes x 8 configs, 300 req/s, steady", 1, CommitmentMode.per_hour, 10.0),
              ("100 classes x 8 configs, 24-hour diurnal, per-hour", 24,
               CommitmentMode.per_hour, 30.0),
              ("100 classes x 8 configs, 24-hour diurnal, fixed-peak", 24,
               CommitmentMode.fixed_peak, 30.0),
              ("100 classes x 8 configs, 24-hour diurnal, base-plus-on-demand", 24,
               CommitmentMode.base_plus_on_demand, 30.0)]
    for label, hours, mode, target in checks:
        p = instance(100, 8, hours=hours, mode=mode)
        for s in solvers:
            r = timed(p, s)
            ok = "OK" if r["total_s"] <= target and r["status"] == "optimal" else "MISSED"
            print(f"{label} [{s}]: {r['total_s']:.2f} s, {r['status']}, "
                  f"${r['cost_per_hour_usd']:.2f}/h, gap {r['gap_achieved']}, "
                  f"{r['variables']} vars ({r['integers']} integer), "
                  f"{r['constraints']} rows; target <= {target:g} s: {ok}")


def scaling_table(solvers: list[str]) -> str:
    rows = [(c, k, 1, CommitmentMode.per_hour) for c, k in
            [(10, 4), (25, 8), (50, 8), (100, 8), (200, 8), (400, 8)]]
    rows += [(c, 8, 24, CommitmentMode.per_hour) for c in (10, 25, 50, 100)]
    rows += [(100, 8, 24, CommitmentMode.fixed_peak),
             (100, 8, 24, CommitmentMode.base_plus_on_demand)]
    head = ("| classes | configs | hours | mode | variables (integer) | rows | "
            + " | ".join(f"{s} s" for s in solvers) + " |")
    lines = [head, "|" + "---|" * (6 + len(solvers))]
    for c, k, hours, mode in rows:
        p = instance(c, k, total_rps=3.0 * c, hours=hours, mode=mode)
        cells = []
        meta = None
        for s in solvers:
            r = timed(p, s)
            meta = r
            cells.append(f"{r['total_s']:.2f}" + ("" if r["status"] == "optimal"
                                                  else f" ({r['status']}, gap "
                                                  f"{r['gap_achieved']})"))
        assert meta is not None
        label = "steady" if hours == 1 else mode.value
        lines.append(f"| {c} | {k} | {hours} | {label} | {meta['variables']} "
                     f"({meta['integers']}) | {meta['constraints']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


class StepClock:
    """A progress reporter (``fleetplan._progress``) that keeps each step's wall seconds."""

    def __init__(self) -> None:
        self.t0: dict[str, float] = {}
        self.seconds: dict[str, float] = {}

    def start(self, name: str, total: int | None = None) -> None:
        self.t0[name] = time.perf_counter()

    def advance(self, name: str, amount: int = 1) -> None:
        pass

    def finish(self, name: str) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - self.t0[name]


def cold_scenario(n_classes: int = 100, workloads: int = 100, total_rps: float = 300.0,
                  seed: int = 7) -> Any:
    """The --cold scenario (module docstring): buckets and rates of :func:`instance`."""
    from fleetplan.optimize.bracket import bracket
    from fleetplan.replica.params import replica_params
    from fleetplan.scenario import Scenario
    from fleetplan.workload.lengths import LengthModel

    model = "DeepSeek-R1-Distill-Qwen-14B"
    rng = np.random.default_rng(seed)
    ins = np.geomspace(32, 4096, workloads)
    outs = np.geomspace(32, 1024, workloads)
    rng.shuffle(outs)
    rates = rng.dirichlet(np.ones(n_classes)) * total_rps
    params = [replica_params(model, c) for c in CONFIGS]

    def bucket(x: float, ratio: float) -> dict[str, Any]:
        return {"dist": "uniform", "low": max(1, round(x / ratio)), "high": round(x * ratio)}

    rin = (4096 / 32) ** (0.5 / max(workloads - 1, 1))
    rout = (1024 / 32) ** (0.5 / max(workloads - 1, 1))
    classes = []
    for i in range(n_classes):
        w = i % workloads
        lengths = {"input_tokens": bucket(float(ins[w]), rin),
                   "output_tokens": bucket(float(outs[w]), rout)}
        lm = LengthModel.model_validate({"input": lengths["input_tokens"],
                                         "output": lengths["output_tokens"]})
        floor = min(b.unloaded_ttft_ms for p in params
                    if (b := bracket(p, lm)) is not None)
        reachable = [t for t in TIERS_MS if 0.95 * t > 1.2 * floor]
        tier = float(reachable[int(rng.integers(len(reachable)))])
        classes.append({"name": f"b{i:03d}", "rate_rps": round(float(rates[i]), 4), **lengths,
                        "slo": {"ttft_p99_ms": tier}})
    return Scenario.model_validate({
        "model": model, "classes": classes, "candidates": list(CONFIGS),
        "grid_g_per_kwh": {"EU27": 242.0}})


def _cold(n_classes: int, workloads: int, solver: str) -> None:
    from fleetplan.optimize.solve import solve

    sc = cold_scenario(n_classes, workloads)
    print(f"cold solve: {n_classes} classes ({workloads} distinct workloads) x {len(CONFIGS)} "
          f"candidates, {sum(c.rate_rps or 0 for c in sc.classes):.0f} req/s, solver {solver}, "
          f"local processes ({os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory(prefix="fleetplan-cold-") as cache:
        for label, target in (("cold", 120.0), ("warm", 10.0),
                              ("warm capacities, plans simulated again", math.inf)):
            if label.startswith("warm capacities"):  # what a changed scenario costs at least
                shutil.rmtree(Path(cache) / "verification", ignore_errors=True)
            clock = StepClock()
            t0 = time.perf_counter()
            plan = solve(sc, solver=solver, cache_dir=cache, progress=clock)
            wall = time.perf_counter() - t0
            steps = "; ".join(f"{k} {v:.1f} s" for k, v in clock.seconds.items())
            ok = ("no target" if math.isinf(target)
                  else f"target <= {target:g} s: {'OK' if wall <= target else 'MISSED'}")
            print(f"{label}: {wall:.1f} s wall, {plan.status.value}, verified {plan.verified}, "
                  f"${plan.cost_per_hour_usd or 0:.2f}/h, {plan.solver.rounds} rounds; {ok}",
                  flush=True)
            print(f"  steps: {steps}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--solver", action="append", help="cbc, highs (default: every available)")
    ap.add_argument("--table", action="store_true", help="also time the scaling table")
    ap.add_argument("--write-docs", action="store_true",
                    help="write the table into docs/optimizer.md (between the markers)")
    ap.add_argument("--cold", action="store_true",
                    help="time fleetplan solve from an empty capacity cache, then warm")
    ap.add_argument("--targets", action="store_true",
                    help="with --cold: time the MILP targets (24-hour modes) first")
    ap.add_argument("--classes", type=int, default=100, help="--cold: classes (default 100)")
    ap.add_argument("--workloads", type=int, default=100,
                    help="--cold: distinct buckets among the classes (default 100)")
    args = ap.parse_args()
    solvers = args.solver or [s for s in ("cbc", "highs") if s in solver_names()]
    if not args.cold or args.targets:
        print(f"machine: {os.cpu_count()} CPUs; solvers single-threaded, 1% gap, 60 s limit")
        _targets(solvers)
    if args.cold:
        _cold(args.classes, min(args.workloads, args.classes), solvers[0])
        return
    if args.table or args.write_docs:
        table = scaling_table(solvers)
        print(table)
        if args.write_docs:
            text = DOCS.read_text(encoding="utf-8")
            block = ("<!-- scaling-table:start (generated by benchmarks/bench_optimize.py "
                     "--write-docs) -->\n" + table + "\n<!-- scaling-table:end -->")
            new, n = re.subn(r"<!-- scaling-table:start.*?<!-- scaling-table:end -->", block,
                             text, flags=re.S)
            if n != 1:
                raise SystemExit(f"{DOCS}: scaling-table markers not found")
            DOCS.write_text(new, encoding="utf-8")
            print(f"wrote the table into {DOCS}")


if __name__ == "__main__":
    main()
