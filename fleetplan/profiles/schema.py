"""The profile store's columns: one row per measured serving run, units in the names.

This module is the single definition of the store's schema; ``docs/`` shows it as a table
(:func:`schema_markdown`). Latencies are milliseconds (``*_ms``), durations seconds (``*_s``),
rates requests per second, throughputs tokens (or requests) per second, energy joules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["str", "int", "float", "bool"]


@dataclass(frozen=True)
class Column:
    name: str
    kind: Kind
    required: bool
    doc: str


LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")
LATENCY_STATS = ("mean", "std", "p50", "p90", "p95", "p99", "p100")
_LATENCY_DOC = {
    "ttft": "time to first token",
    "tpot": "time per output token after the first (per request)",
    "itl": "inter-token latency (per token gap)",
    "e2e": "end-to-end request latency",
}
# Every run must report these; the rest of the latency statistics may be missing.
_REQUIRED_LATENCY = {"ttft_mean_ms", "ttft_p50_ms", "ttft_p99_ms", "tpot_mean_ms", "tpot_p50_ms",
                     "tpot_p99_ms", "itl_mean_ms", "itl_p50_ms", "itl_p99_ms"}

COLUMNS: tuple[Column, ...] = (
    Column("run_id", "str", True, "sha256 (first 16 hex) of the run's source record; dedupe key"),
    Column("model", "str", True, "short model name, e.g. DeepSeek-R1-Distill-Qwen-14B"),
    Column("model_id", "str", True, "full model id as given to the server"),
    Column("gpu", "str", True, "canonical GPU name, e.g. RTX-4090"),
    Column("gpu_count", "int", True, "GPUs serving one replica"),
    Column("tp_size", "int", True, "tensor-parallel size"),
    Column("config", "str", True, "hardware configuration, <count>x<GPU>"),
    Column("engine", "str", True, "serving engine, e.g. vllm"),
    Column("engine_version", "str", False, "engine version when known"),
    Column("date", "str", False, "date of the run as the result file states it"),
    Column("source_format", "str", True, "ingest format that read the run"),
    Column("source_file", "str", True, "file the run came from (name)"),
    Column("source_line", "int", True, "line of that file (1-based)"),
    Column("num_prompts", "int", True, "requests sent"),
    Column("request_rate", "float", True, "target request rate, req/s (inf = all at once)"),
    Column("burstiness", "float", True, "gamma shape of inter-arrival gaps (1.0 = Poisson)"),
    Column("max_concurrency", "int", False, "client-side concurrency cap (empty = none)"),
    Column("dataset", "str", False, "prompt dataset"),
    Column("duration_s", "float", True, "benchmark duration, first send to last response"),
    Column("completed", "int", True, "requests completed"),
    Column("failed", "int", True, "requests failed"),
    Column("total_input_tokens", "int", True, "prompt tokens of completed requests"),
    Column("total_output_tokens", "int", True, "generated tokens of completed requests"),
    Column("request_throughput", "float", True, "completed requests per second of duration"),
    Column("request_goodput", "float", False, "requests per second meeting the goodput SLO"),
    Column("output_throughput", "float", True, "output tokens per second"),
    Column("total_token_throughput", "float", True, "input + output tokens per second"),
    *(
        Column(f"{m}_{s}_ms", "float", f"{m}_{s}_ms" in _REQUIRED_LATENCY,
               f"{_LATENCY_DOC[m]}, {s}, ms")
        for m in LATENCY_METRICS
        for s in LATENCY_STATS
    ),
    Column("gpu_energy_j", "float", False, "GPU energy over the run, all GPUs, measured"),
    Column("gpu_avg_power_w", "float", False, "average GPU power over the run, all GPUs, measured"),
    Column("partial", "bool", True, "the run was interrupted; its figures cover part of it"),
    Column("input_lens", "str", False, "prompt tokens of each request in send order, "
           "space-separated (from the result's per-request arrays; empty when it had none or "
           "a request failed)"),
    Column("output_lens", "str", False, "generated tokens of each request in send order, "
           "space-separated (as input_lens)"),
    Column("engine_args", "str", False, "engine settings the server was started with, as "
           "stated at ingest (--engine-arg), space-separated KEY=VALUE, e.g. max_num_seqs=512; "
           "empty: the engine version's defaults"),
    Column("prefix_cache", "str", False, "the prompts' prefix-cache state when the run "
           "started, as stated at ingest: cold, or warm (--warm-prefix-cache); empty: the "
           "study's series protocol (cached after the series' first, highest-rate run)"),
)

COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
BY_NAME: dict[str, Column] = {c.name: c for c in COLUMNS}
# Columns where +inf is a legitimate value (vLLM writes request_rate=inf for "all at once").
INF_ALLOWED = frozenset({"request_rate"})


def schema_markdown() -> str:
    """The schema as a Markdown table (for docs)."""
    lines = ["| column | type | required | meaning |", "| --- | --- | --- | --- |"]
    lines += [f"| `{c.name}` | {c.kind} | {'yes' if c.required else ''} | {c.doc} |"
              for c in COLUMNS]
    return "\n".join(lines) + "\n"
