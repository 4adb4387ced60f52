"""Experiment (issue 41): a fixed time per layer and step on the spec path, held out per dataset.

Every mixture-of-experts model of ``data/external`` is predicted too fast on the spec path
(TPOT p50 signed median: Qwen3.6-35B-A3B on RTX 3090 -4 % where the same rig's dense models are
+3 %, Mixtral-8x7B on A100 / H100 SXM -16 % against -7 %, gpt-oss-20b on four data-centre GPUs
-51 %). Is the missing time a fixed cost per MoE layer and step (the router, top-k, permute and
grouped-GEMM kernels of a small batch, which do not scale with the memory bandwidth)? And is
there a fixed cost per layer of every model (launch-bound kernels: small models split over
many GPUs, 126-layer models)?

Each value of a grid is added to the ``c_step`` of every uncalibrated prediction
(``fleetplan.replica.predict.resolve_params`` wrapped: ``c_step + value x layers``, of MoE models
only with ``--moe``), ``scripts/eval_external.py`` is run on each dataset, and the value is
chosen leave-one-dataset-out: for each dataset, the value with the lowest summed |log error| of
throughput and TPOT p50 over the *other* datasets' rows; the held-out dataset's median |error|
at that value is printed beside its median at 0.

Usage: python experiments/try_layer_floors.py [--moe] [US ...]
(default grid 0 25 50 75 100 150 us; about 15 s per value on one core).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import fleetplan.replica.predict as predict_mod
from fleetplan.catalog.models import ModelSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import eval_external  # noqa: E402  (a script of this repository, not a package)

_RESOLVE = predict_mod.resolve_params  # the product's, wrapped afresh for each value
_RESOLVER = eval_external.Resolver()  # the rows' model names -> specs, read once
SOURCES = ("4x3090-llm-benchmarks", "gpu-conc", "lambdalabs-vllm-benchmark")
METRICS = ("throughput", "TPOT p50")


def _with_floor(per_layer_s: float, moe_only: bool) -> Any:
    def resolve(model: Any, config: str, **kw: Any) -> Any:
        p = _RESOLVE(model, config, **kw)
        ctx = kw["context"]  # eval_external passes one
        spec = model if isinstance(model, ModelSpec) else ctx.catalog.model(model)
        if p.calibrated or (moe_only and not spec.is_moe):
            return p
        return p.with_(c_step=p.c_step + per_layer_s * spec.layers)
    return resolve


def errors(per_layer_s: float, moe_only: bool, source: str) -> list[dict[str, float]]:
    """Each predicted row's errors (MoE rows only with ``moe_only``) at ``per_layer_s``."""
    predict_mod.resolve_params = _with_floor(per_layer_s, moe_only)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            eval_external.main(["--source", source, "--json", str(out)])
        rows = json.loads(out.read_text(encoding="utf-8"))
    keep = []
    for r in rows:
        if r["refused"]:
            continue
        if not moe_only or _RESOLVER.spec_of(_RESOLVER.model(r["model"])[0]).is_moe:
            keep.append({m: r["errors"][m] for m in METRICS if r["errors"].get(m) is not None})
    return keep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("grid", nargs="*", type=float, default=[0, 25, 50, 75, 100, 150])
    ap.add_argument("--moe", action="store_true", help="the floor on MoE models only")
    args = ap.parse_args()
    res = {}
    for us in args.grid:
        for s in SOURCES:
            res[us, s] = errors(us * 1e-6, args.moe, s)
    predict_mod.resolve_params = _RESOLVE

    def loss(us: float, sources: list[str]) -> float:
        return sum(abs(math.log1p(e)) for s in sources for row in res[us, s] for e in row.values())

    def med(us: float, s: str, m: str) -> str:
        v = [row[m] for row in res[us, s] if m in row]
        return (f"{100 * statistics.median(map(abs, v)):.0f}% "
                f"({100 * statistics.median(v):+.0f}%)") if v else "-"

    print(f"{'MoE layers' if args.moe else 'every layer'}: summed |log error| per dataset")
    for s in SOURCES:
        print(f"  {s:26s} n={len(res[args.grid[0], s]):3d} "
              + " ".join(f"{us:g}us {loss(us, [s]):.1f}" for us in args.grid))
    for s in SOURCES:
        others = [o for o in SOURCES if o != s]
        pick = min(args.grid, key=lambda us: loss(us, others))
        print(f"  {s} held out: {pick:g} us chosen on the others; throughput "
              f"{med(0, s, 'throughput')} -> {med(pick, s, 'throughput')}, TPOT p50 "
              f"{med(0, s, 'TPOT p50')} -> {med(pick, s, 'TPOT p50')}")
    print(f"  chosen on all: {min(args.grid, key=lambda us: loss(us, list(SOURCES))):g} us")


if __name__ == "__main__":
    main()
