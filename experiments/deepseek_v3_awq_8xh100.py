"""Experiment (issue 41): DeepSeek-V3 (AWQ) on 8 x H100 SXM, vLLM 0.7.3, against the spec path.

The one public vLLM benchmark of a multi-head latent attention MoE model found here:
https://github.com/dzhsurf/deepseek-v3-r1-deploy-and-benchmarks (Hiram Deng, snapshot commit
``96cacccb6e660b2b892f19d4c4f7c76312493615``, 2025-03-13; no licence file, so nothing of it is
copied into the repository: the figures below are the numbers its charts print as labels, read
off ``docs/images/*.jpg`` at that commit). ``cognitivecomputations/DeepSeek-V3-AWQ`` on one
node of 8 x H100 SXM5 (tensor parallel 8; ``docker-compose.yaml``: ``--max-model-len 8000
--max-num-seqs 128 --max-num-batched-tokens 32768 --gpu-memory-utilization 0.95
--enable-chunked-prefill --enable-prefix-caching``), and the same checkpoint over two such
nodes as tensor parallel 8 x pipeline parallel 2, the nodes joined by 100 Gb Ethernet with
NCCL's socket transport (InfiniBand disabled, the README says). Client: vLLM's
``benchmark_serving.py``, sonnet dataset, 1,024-token prompts of which 200 are a shared prefix,
256-token replies (``-i 1024 -o 256``); the charts' total over output throughput gives 933
prompt tokens a request on both servers (a named derivation: (total - output) / output x 256).

Rows (chart, x, figures as printed):
- ``throughput-max-concurrency-1-5.jpg``: concurrency 1-5, output tok/s 33 / 56 / 66 / 98 / 103;
- ``ttft-ttlt-max-concurrency-1-24.jpg``: median TTFT 292 / 392 / 505 / 613 / 729 ms at 1-5;
- ``itl-max-concurrency.jpg``: median ITL 30 / 34 / 43 / 38 / 46 ms at 1-5;
- ``2node-throughput-vs-client-request.jpg``: request rate 1 / 2 / 3 / 50 req/s, total tok/s
  1125.0 / 2071.5 / 2661.3 / 4559.7 and output tok/s 242.2 / 445.9 / 572.8 / 981.5 (100
  prompts a rate, the run script's default ``-p 100``).

The checkpoint's ``config.json`` is not reachable here: the DeepSeek-V3 fixture of
``tests/data/hf-configs`` with ``quantization_config`` replaced by AWQ 4-bit, group 64, zero
point, ``kv_a_proj_with_mqa`` left unquantized (an assumption: the common settings of that
export, not read from it). vLLM 0.7.3 serves it with the latent, whole prompts and no prefix
cache (``fleetplan.replica.mla_serving``), and its MoE layers with the ``moe_wna16`` Triton
kernels (``awq_marlin.py`` 138-144 of the 0.7.3 sdist: an AWQ MoE of more than 32 experts).

Usage: python experiments/deepseek_v3_awq_8xh100.py [--version V] (1 s; V default 0.7.3).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from fleetplan.profiles.external import ExternalRun

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import eval_external  # noqa: E402  (a script of this repository, not a package)

HF_ID = "cognitivecomputations/DeepSeek-V3-AWQ"
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": True,
       "version": "gemm", "modules_to_not_convert": ["self_attn.kv_a_proj_with_mqa"]}
SERVER: dict[str, Any] = dict(source="dzhsurf-deepseek-v3", source_file="docs/images",
              commit="96cacccb6e660b2b892f19d4c4f7c76312493615", model=HF_ID, gpu="H100-SXM",
              engine="vllm", max_num_seqs=128, max_num_batched_tokens=32768, max_model_len=8000,
              gpu_memory_utilization=0.95, dataset="sonnet (1024 in, 200 shared, 256 out)",
              input_tokens_mean=933.0, output_tokens_mean=256.0, output_tokens_requested=256)
ONE_NODE: dict[str, Any] = dict(gpu_count=8, tp=8, pp=1, nodes=1)
TWO_NODES: dict[str, Any] = dict(gpu_count=16, tp=8, pp=2, nodes=2, interconnect="Ethernet-100G")
CONCURRENCY = [(1, 33, 292, 30), (2, 56, 392, 34), (3, 66, 505, 43), (4, 98, 613, 38),
               (5, 103, 729, 46)]  # (in flight, output tok/s, median TTFT ms, median ITL ms)
RATES = [(1, 1125.0, 242.2), (2, 2071.5, 445.9), (3, 2661.3, 572.8), (50, 4559.7, 981.5)]


def rows(version: str) -> list[ExternalRun]:
    out = [ExternalRun(**SERVER, **ONE_NODE, engine_version=version, run_id=f"1node/c{c}",
                       load_kind="concurrency", load_value=c, output_tok_s=tok,
                       ttft_p50_ms=ttft, itl_p50_ms=itl)
           for c, tok, ttft, itl in CONCURRENCY]
    out += [ExternalRun(**SERVER, **TWO_NODES, engine_version=version, run_id=f"2nodes/r{r}",
                        load_kind="poisson", load_value=r, num_prompts=100, total_tok_s=tot,
                        output_tok_s=tok)
            for r, tot, tok in RATES]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", default="0.7.3", help="the vLLM version replayed")
    args = ap.parse_args()
    cfg = json.loads((ROOT / "tests/data/hf-configs/DeepSeek-V3/config.json").read_text())
    cfg["quantization_config"] = AWQ
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "DeepSeek-V3-AWQ"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(cfg))
        res = eval_external.Resolver()
        res.configs[HF_ID] = folder
        errs: dict[str, list[float]] = {}
        held: dict[str, list[bool]] = {}
        for run in rows(args.version):
            o = eval_external.predict_row(run, res, engine_args=True)
            if o.refused:
                print(f"{run.run_id}: refused: {o.refused}")
                continue
            cells = "  ".join(
                f"{k} {100 * v:+.0f}%" + {True: " (in band)", False: " (outside band)"}.get(
                    o.inside.get(k), "") for k, v in sorted(o.errors.items()))
            print(f"{run.run_id:12s} {o.config:26s} {cells}")
            for k, v in o.errors.items():
                errs.setdefault(f"{run.run_id.split('/')[0]} {k}", []).append(v)
            for k, inside in o.inside.items():
                held.setdefault(k, []).append(inside)
    for k, v in sorted(errs.items()):
        print(f"median {k}: {100 * statistics.median(v):+.0f}% (n={len(v)})")
    for k, flags in sorted(held.items()):
        print(f"80% band holds {k}: {sum(flags)} of {len(flags)}")


if __name__ == "__main__":
    main()
