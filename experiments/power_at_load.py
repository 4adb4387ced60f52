"""Energy per output token of one replica at shares of its sustained capacity.

The source of the table in docs/replica-model.md, "Power that follows the work": for each replica,
the highest rate a steady-state run stays stable at (bisection in log space to 3 %: a
stability capacity, not the optimizer's SLO-bound one, which is
``fleetplan.optimize.capacity.find_capacity``), then the mean power and the energy per output
token at 10, 50 and 100 % of it, with power that follows the work and with every GPU at TDP.
Bundled calibration, catalog idle power and TDP.

Usage: python experiments/power_at_load.py [MODEL CONFIG]   (the docs' three replicas without
arguments; a few seconds each once the compiled engine is cached)
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass

from fleetplan.catalog import HardwareConfig, bundled_catalog
from fleetplan.replica.params import ReplicaParams, replica_params
from fleetplan.replica.power import StepPower
from fleetplan.replica.steady import steady_state

REPLICAS = (("DeepSeek-R1-Distill-Qwen-14B", "1xH100-PCIe"),
            ("DeepSeek-R1-Distill-Qwen-7B", "1xRTX-4090"),
            ("DeepSeek-R1-Distill-Qwen-14B", "4xRTX-4090"))


@dataclass(frozen=True)
class LoadEnergy:
    """Energy of one replica at a share of its capacity (sustained load)."""

    load: float  # share of the capacity
    rate: float  # requests/s
    power_w: float  # mean power of all the replica's GPUs, power that follows the work
    j_per_output_token: float
    tdp_j_per_output_token: float  # the same with every GPU at TDP (``power: tdp``)


def stable_capacity_rps(params: ReplicaParams, *, lo: float = 0.05, hi: float = 200.0,
                        rel_tol: float = 0.03, seed: int = 0, duration_s: float = 600.0,
                        warmup_s: float = 60.0) -> float:
    """The highest sustained rate (requests/s) at which ``steady_state`` stays stable, by
    bisection in log space to ``rel_tol``."""

    def ok(rate: float) -> bool:
        return steady_state(params, rate=rate, seed=seed, duration_s=duration_s,
                            warmup_s=warmup_s).stable

    if not ok(lo):
        return lo
    while ok(hi) and hi < 1e5:
        lo, hi = hi, hi * 2
    while hi / lo > 1.0 + rel_tol:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def load_energy(params: ReplicaParams, power: StepPower, gpus: int,
                loads: Sequence[float] = (0.1, 0.5, 1.0), *, seed: int = 0,
                duration_s: float = 600.0, warmup_s: float = 60.0) -> list[LoadEnergy]:
    """Energy per output token of one replica at ``loads`` (shares of
    :func:`stable_capacity_rps`)."""
    cap = stable_capacity_rps(params, seed=seed, duration_s=duration_s, warmup_s=warmup_s)
    out = []
    for share in loads:
        res = steady_state(params, rate=cap * share, seed=seed, duration_s=duration_s,
                           warmup_s=warmup_s)
        watts = gpus * (power.idle_w + (power.tdp_w - power.idle_w)
                        * min(1.0, power.scale * res.power_activity))
        tok = res.output_tokens_per_s
        out.append(LoadEnergy(load=float(share), rate=cap * share, power_w=watts,
                              j_per_output_token=watts / tok if tok > 0 else math.nan,
                              tdp_j_per_output_token=(gpus * power.tdp_w / tok if tok > 0
                                                      else math.nan)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("replica", nargs="*", help="MODEL CONFIG (default: the docs' three)")
    args = ap.parse_args()
    if args.replica and len(args.replica) != 2:
        ap.error("give MODEL and CONFIG, or nothing")
    replicas = [tuple(args.replica)] if args.replica else list(REPLICAS)
    print("| replica | load | rate req/s | mean power W | J / output token | at TDP |")
    print("| --- | --- | --- | --- | --- | --- |")
    for model, config in replicas:
        hw = HardwareConfig.parse(config)
        g = bundled_catalog().gpu(hw.gpu)
        for row in load_energy(replica_params(model, config), StepPower(g.idle_w, g.tdp_w),
                               gpus=hw.gpu_count):
            print(f"| {model} on {config} | {row.load:.0%} | {row.rate:.1f} | "
                  f"{row.power_w:.0f} | {row.j_per_output_token:.3g} | "
                  f"{row.tdp_j_per_output_token:.3g} |")


if __name__ == "__main__":
    main()
