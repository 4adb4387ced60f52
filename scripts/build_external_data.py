#!/usr/bin/env python3
"""Build the compact external benchmark fixtures under ``data/external/`` from fetched mirrors.

Each public source (a GitHub repository brought here as a bare git directory by the session's
``fetch`` tool, under ``/work/.mirror/<owner>+<name>/repo``) becomes one tidy CSV of derived
per-run summary rows: the server (GPU, count, tensor/pipeline parallel, engine and version,
quantization, engine settings that differ from vLLM's defaults), the load (concurrency or Poisson
rate, prompt count, token lengths as recorded) and the measured outcome (req/s, output tok/s,
TTFT/TPOT/ITL/E2E percentiles). A cell stays empty when the source does not state the figure;
nothing is invented. Every row names its source, the file inside the repository and the commit.

Usage::

    .venv/bin/python scripts/build_external_data.py [--mirrors /work/.mirror] [--only SLUG ...]

Re-runnable and deterministic: rows are sorted, floats rounded to 4 significant digits, and a
source whose mirror is missing keeps its committed CSV (with a note on stderr).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from fleetplan.profiles.external import COLUMNS as EXTERNAL_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "data" / "external"

# The column contract is the loader's (fleetplan/profiles/external.py, ExternalRun): one source
# of truth for the CSV header and its order.
COLUMNS = list(EXTERNAL_COLUMNS)

# Engine flags kept in ``engine_args`` (besides the ones with their own column) because they
# change performance; everything else on a launch line (ports, names, parsers) is dropped.
PERF_FLAGS = (
    "enable-chunked-prefill", "no-enable-chunked-prefill", "enable-prefix-caching",
    "no-enable-prefix-caching", "enforce-eager", "disable-custom-all-reduce",
    "max-cudagraph-capture-size", "attention-backend", "block-size", "swap-space",
    "num-scheduler-steps", "enable-expert-parallel", "data-parallel-size",
    "pipeline-parallel-size", "quantization", "dtype", "compilation-config",
    "async-scheduling", "cpu-offload-gb",
)
PERF_ENV = ("NCCL_P2P_DISABLE", "VLLM_ATTENTION_BACKEND", "VLLM_USE_V1")


# --------------------------------------------------------------------------- helpers
def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={repo}", *args], check=True,
                          capture_output=True).stdout


def head_commit(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").decode().strip()


def show(repo: Path, path: str, rev: str = "HEAD") -> str:
    return git(repo, "show", f"{rev}:{path}").decode("utf-8")


def fences(text: str) -> list[str]:
    """The bodies of a Markdown text's fenced code blocks, in order."""
    return re.findall(r"```[a-z]*\n(.*?)```", text, re.S)


def ls(repo: Path) -> list[str]:
    return git(repo, "ls-tree", "-r", "--name-only", "HEAD").decode().splitlines()


def num(v: Any) -> float | None:
    """A finite number or None (the source's null, '', NaN, or a non-number)."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f and abs(f) != float("inf") else None


def fmt(v: Any) -> str:
    """One CSV cell: empty for None, 4 significant digits for floats (deterministic)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v == int(v) and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.4g}" if abs(v) >= 1e-3 else f"{v:.4e}"
    return str(v).replace("\n", " ").strip()


def parse_launch(argv: list[str] | None, cmd: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """(flags, env) of a ``vllm serve`` launch: ``--name value`` / ``--flag`` pairs and the
    ``VAR=value`` environment assignments on the same line(s)."""
    tokens: list[str] = []
    if argv:
        tokens = [str(t) for t in argv]
    elif cmd:
        text = re.sub(r"#[^\n]*", " ", cmd).replace("\\\n", " ")
        try:
            tokens = shlex.split(text)
        except ValueError:
            tokens = text.split()
    flags: dict[str, str] = {}
    env: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        t = tokens[i]
        m = re.fullmatch(r"(?:export\s+)?([A-Z][A-Z0-9_]+)=(.*)", t)
        if m:
            env[m.group(1)] = m.group(2)
        elif t.startswith("--"):
            name, eq, val = t[2:].partition("=")
            if not eq and i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                val = tokens[i + 1]
                i += 1
            flags[name] = val
        i += 1
    return flags, env


def engine_args_cell(flags: dict[str, str], env: dict[str, str],
                     extra: Iterable[tuple[str, Any]] = ()) -> str:
    parts = [f"{k.replace('-', '_')}={flags[k]}" if flags[k] else k.replace("-", "_")
             for k in sorted(flags) if k in PERF_FLAGS]
    parts += [f"env:{k}={env[k]}" for k in sorted(env) if k in PERF_ENV]
    parts += [f"{k}={fmt(v)}" for k, v in extra if v is not None]
    return ";".join(parts)


def write_csv(slug: str, rows: list[dict[str, Any]]) -> Path:
    for r in rows:
        unknown = set(r) - set(COLUMNS)
        if unknown:
            raise SystemExit(f"build_external_data: {slug}: unknown columns {sorted(unknown)}")
    cells = [[fmt(r.get(c)) for c in COLUMNS] for r in rows]
    key = {c: i for i, c in enumerate(COLUMNS)}

    def sort_key(c: list[str]) -> tuple[Any, ...]:
        lv = num(c[key["load_value"]])
        return (c[key["source_file"]], c[key["run_id"]], c[key["load_kind"]],
                lv if lv is not None else -1.0)
    cells.sort(key=sort_key)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    w.writerows(cells)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{slug}.csv"
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- 4 x RTX 3090
def own_sweep(curve: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The curve's points, one per concurrency: where a curve measures a concurrency more than
    once (two sweeps interleaved: ``nvfp4/cyankiwi-AWQ/tp2`` and ``nvfp4/nvidia-NVFP4/tp2``,
    whose second sweep is 0.53-0.95 x as fast with 1.8-2.7 x the TTFT at every concurrency, under
    conditions the record does not state), the first point listed, the sweep whose
    concurrency-1 point is the record's own headline figures."""
    seen: set[Any] = set()
    kept = []
    for p in curve:
        conc = p.get("concurrency", p.get("conc"))
        if conc not in seen:
            seen.add(conc)
            kept.append(p)
    return kept


def build_4x3090(repo: Path) -> list[dict[str, Any]]:
    """LottoLottoLotto/4x3090-llm-benchmarks: ``data/benchmarks.jsonl`` (schema v2), vLLM rows
    without speculative decoding whose throughput meaning is known; one row per concurrency
    point of a record's ``curve``, else one row from the record's own fields."""
    commit = head_commit(repo)
    model_map = json.loads(show(repo, "model-map.json"))
    rows: list[dict[str, Any]] = []
    for line in show(repo, "data/benchmarks.jsonl").splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        if rec.get("engine") != "vllm" or rec.get("record_kind") != "measurement":
            continue
        if rec.get("output_tps_kind") not in ("aggregate_output", "single_stream_wall"):
            continue  # METHODOLOGY.md: 'unknown' semantics must not enter comparisons
        if rec.get("spec_decode"):
            continue  # speculative decoding: a different step schedule; left out (README)
        flags, env = parse_launch(rec.get("launch_argv"), rec.get("launch_cmd"))
        knobs = rec.get("knobs") or {}
        ref = rec.get("checkpoint_ref") or rec.get("model_variant") or rec.get("model")
        # model-map.json maps the rig's checkpoint names to the Hugging Face repository of
        # the measured artifact; a few records already name the repository.
        hf = (model_map.get(ref) or model_map.get(rec.get("model_variant") or "")
              or model_map.get(rec["run_id"]) or (ref if "/" in str(ref) else None))
        label = str(knobs.get("label") or "")
        prefix = ("cold" if "prefix-cold" in label else "warm" if "prefix-warm" in label
                  else "unknown")
        kv = rec.get("kv_cache_dtype") or flags.get("kv-cache-dtype") or knobs.get("kv_cache_dtype")
        base = {
            "source": "4x3090-llm-benchmarks", "source_file": "data/benchmarks.jsonl",
            "commit": commit, "run_id": rec["run_id"], "date": rec.get("date"),
            "model": hf, "model_raw": ref,
            "gpu": "RTX-3090", "gpu_raw": "NVIDIA GeForce RTX 3090",
            "gpu_count": (rec.get("tp") or 1) * (rec.get("pp") or 1) * (rec.get("dp") or 1)
            * (rec.get("instances") or 1),
            "tp": rec.get("tp"), "pp": rec.get("pp"), "dp": rec.get("dp"), "nodes": 1,
            "interconnect": ("PCIe-3.0 x16, P2P disabled" if env.get("NCCL_P2P_DISABLE") == "1"
                             else "PCIe-3.0 x16"),
            "power_limit_w": rec.get("power_limit_w"),
            "engine": "vllm", "engine_version": rec.get("engine_version"),
            "dtype": "bfloat16" if rec.get("quant") == "bf16" else None,
            "quant": None if rec.get("quant") == "bf16" else rec.get("quant"),
            "kv_cache_dtype": kv,
            "max_num_seqs": num(flags.get("max-num-seqs")) or num(knobs.get("max_num_seqs")),
            "max_num_batched_tokens": num(flags.get("max-num-batched-tokens"))
            or num(knobs.get("max_num_batched_tokens")),
            "max_model_len": num(flags.get("max-model-len")) or rec.get("context_len"),
            "gpu_memory_utilization": num(flags.get("gpu-memory-utilization"))
            or num(knobs.get("gpu_memory_utilization")),
            "engine_args": engine_args_cell(
                flags, env, [("enable_chunked_prefill", knobs.get("enable_chunked_prefill"))]
                if "enable-chunked-prefill" not in flags else []),
            "load_kind": "concurrency",
            "num_prompts": num(knobs.get("num_prompts")),
            "dataset": f"{rec.get('source')}:{rec.get('objective')}"
            + (f":{label}" if label else ""),
            "input_tokens_mean": rec.get("prompt_tokens"),
            "output_tokens_requested": rec.get("gen_tokens"),
            "prefix_cache": prefix, "prefix_hit_rate": num(knobs.get("prefix_hit_rate")),
            "metric_note": f"output_tok_s={rec.get('output_tps_kind')}",
        }
        curve = own_sweep(rec.get("curve") or [])
        if curve:
            for p in curve:
                conc = p.get("concurrency", p.get("conc"))
                rows.append({**base, "load_value": conc,
                             "completed_rps": num(p.get("req_s")),
                             "output_tok_s": num(p.get("output_tok_s", p.get("out_tps"))),
                             "total_tok_s": num(p.get("tot_tps")),
                             "ttft_p50_ms": num(p.get("ttft_p50", p.get("ttft_ms"))),
                             "ttft_p99_ms": num(p.get("ttft_p99")),
                             "tpot_p50_ms": num(p.get("tpot_ms")),
                             "itl_p50_ms": num(p.get("itl_p50", p.get("itl_ms"))),
                             "e2e_p99_ms": num(p.get("e2e_p99")),
                             "metric_note": base["metric_note"]
                             + ("; curve point" if len(curve) > 1 else "")})
        else:
            out_tps, tpot, note = num(rec.get("output_tok_s")), num(rec.get("tpot_p50_ms")), {}
            decode = num(rec.get("decode_tok_s"))
            if (out_tps and decode and rec.get("concurrency") == 1
                    and abs(out_tps - decode) <= 1e-3 * out_tps and tpot is None):
                # the record's output rate is its decode rate (dflash-depth at 262k tokens:
                # 46 tok/s after a 368 s TTFT), not the wall rate its output_tps_kind says; one
                # stream's decode rate is 1 / its TPOT, and its wall rate is not recorded
                out_tps, tpot = None, 1000.0 / decode
                note = {"metric_note": base["metric_note"] + "; but output_tok_s equals the "
                        "record's decode_tok_s (TTFT left out): tpot_p50_ms = 1000 / "
                        "decode_tok_s (one stream), output_tok_s left empty"}
            rows.append({**base, "load_value": rec.get("concurrency"),
                         "completed_rps": num(rec.get("req_s")),
                         "output_tok_s": out_tps,
                         "total_tok_s": num(rec.get("total_tok_s")),
                         "ttft_p50_ms": num(rec.get("ttft_p50_ms")),
                         "ttft_p99_ms": num(rec.get("ttft_p99_ms")),
                         "tpot_p50_ms": tpot,
                         "itl_p50_ms": num(rec.get("itl_p50_ms")),
                         "e2e_p99_ms": num(rec.get("e2e_p99_ms")), **note})
    return rows


# --------------------------------------------------------------------------- 2 x RTX 4090
def build_2x4090(repo: Path) -> list[dict[str, Any]]:
    """MadCodeTX/llm-bench-2x4090: ``results/*.json`` of vLLM runs that served (TP2). From each
    battery: the single-stream decode (1 request, up to 1,200 tokens), the streaming TTFT probe
    (a short prompt, 24 tokens), the ~7-15K-token prefill probe (1 output token) and the
    aggregate sweep (concurrency 32, 64 requests of up to 256 tokens). Server flags per
    ``bench.py``'s ``serve_attempt``: ``--max-num-seqs 32 --max-num-batched-tokens 8192``."""
    commit = head_commit(repo)
    rows: list[dict[str, Any]] = []
    for path in ls(repo):
        if not (path.startswith("results/") and path.endswith(".json")):
            continue
        d = json.loads(show(repo, path))
        engine = d.get("engine") or "vllm"
        if engine != "vllm" or d.get("status") != "ok":
            continue
        b = d.get("battery") or {}
        sc = d.get("serve_config") or {}
        flags, _env = parse_launch(None, d.get("flags") or "")
        version = d.get("engine_version") or d.get("vllm_version")
        pl = (d.get("hw") or {}).get("power_limit_w")
        base = {
            "source": "llm-bench-2x4090", "source_file": path, "commit": commit,
            "date": (d.get("ts") or "")[:10] or None,
            "model": d["repo"], "model_raw": d["repo"],
            "gpu": "RTX-4090", "gpu_raw": "NVIDIA GeForce RTX 4090",
            "gpu_count": 2, "tp": 2, "pp": 1, "nodes": 1, "interconnect": "PCIe (no NVLink)",
            "power_limit_w": max(pl) if isinstance(pl, list) and pl else num(pl),
            "engine": "vllm", "engine_version": version,
            "quant": d.get("quant") if d.get("quant") not in (None, "native") else None,
            # the recorded launch flags name the KV-cache dtype where it is not the default
            # (models.json overrides: --kv-cache-dtype fp8 on the FP8/NVFP4/QAT checkpoints)
            "kv_cache_dtype": flags.get("kv-cache-dtype") or None,
            "max_num_seqs": 32, "max_num_batched_tokens": 8192,
            "max_model_len": sc.get("max_model_len"),
            "gpu_memory_utilization": sc.get("gpu_mem_util"),
            "engine_args": engine_args_cell(flags, {}),
            "prefix_cache": "cold",  # every prompt carries a random 10-letter salt
            "dataset": "llm-bench-2x4090 battery",
        }
        rid = path.rsplit("/", 1)[-1].removesuffix(".json")
        if num(b.get("single_stream_toks")) is not None:
            rows.append({**base, "run_id": f"{rid}/single_stream", "load_kind": "concurrency",
                         "load_value": 1, "num_prompts": 1, "output_tokens_requested": 1200,
                         "output_tok_s": num(b.get("single_stream_toks")),
                         "metric_note": "output_tok_s=completion tokens / wall time of one "
                                        "request (includes TTFT)"})
        if num(b.get("ttft_s")) is not None:
            rows.append({**base, "run_id": f"{rid}/ttft", "load_kind": "concurrency",
                         "load_value": 1, "num_prompts": 1, "output_tokens_requested": 24,
                         "ttft_p50_ms": num(b["ttft_s"]) * 1000.0,
                         "metric_note": "ttft_p50_ms=one streamed short chat request "
                                        "(rounded to 10 ms in the source)"})
        pf = b.get("prefill") or {}
        if num(pf.get("toks")) is not None and num(pf.get("prompt_tok")):
            rows.append({**base, "run_id": f"{rid}/prefill", "load_kind": "concurrency",
                         "load_value": 1, "num_prompts": 1,
                         "input_tokens_mean": num(pf.get("prompt_tok")),
                         "output_tokens_requested": 1,
                         "e2e_p50_ms": num(pf["prompt_tok"]) / num(pf["toks"]) * 1000.0,
                         "total_tok_s": num(pf.get("toks")),
                         "metric_note": "e2e_p50_ms=prompt tokens / prefill tok/s of one "
                                        "1-token request"})
        for sw in b.get("sweep") or []:
            n = sw.get("concurrency")
            rows.append({**base, "run_id": f"{rid}/sweep{n}", "load_kind": "concurrency",
                         "load_value": n, "num_prompts": 2 * n if n else None,
                         "output_tokens_requested": 256 if b.get("battery_mode") != "reduced"
                         else 128,
                         "output_tok_s": num(sw.get("agg_toks")),
                         "metric_note": "output_tok_s=all completion tokens / wall time of "
                                        "the batch"})
    return rows


# --------------------------------------------------------------------------- Lambda H100/A100
LAMBDA_GPUS = {"H100-80GB-SXM": ("H100-SXM", "NVLink-4"),
               "A100-80GB-SXM": ("A100-80GB", "NVLink-3")}


def build_lambda(raw: Path) -> list[dict[str, Any]]:
    """LambdaLabsML/vllm-benchmark: vLLM 0.5.4 ``benchmark_serving.py`` results (ShareGPT, all
    ``num_prompts`` sent at once) on 1-8 x H100 / A100 80GB SXM. The repository (~800 MB)
    exceeds the fetch limit, so the builder reads ``data/external/raw/lambdalabs-vllm-benchmark
    .json``: the summary fields of the chosen result files, copied from their heads. Server
    flags per ``benchmark.py`` (``--max-num-seqs 1024 --gpu-memory-utilization 0.95``,
    ``--tensor-parallel-size`` = GPU count) and ``max_model_len`` from the file name."""
    data = json.loads(raw.read_text(encoding="utf-8"))
    rows: list[dict[str, Any]] = []
    for f in data["files"]:
        m = re.fullmatch(r"results/prompt_(\d+)/(\d+)x([\w-]+)/(.+)_tp(\d+)_len(\d+)\.json",
                         f["path"])
        if m is None:
            raise SystemExit(f"build_external_data: lambda: unexpected path {f['path']}")
        n_prompts, count, gpu_raw, _model, tp, max_len = m.groups()
        gpu, link = LAMBDA_GPUS[gpu_raw]
        done = int(f["completed"])
        # the copied totals must reproduce the file's own rates (catches a copying slip)
        for total, rate in (("completed", "request_throughput"),
                            ("total_output_tokens", "output_throughput")):
            if abs(float(f[total]) / f["duration"] / f[rate] - 1) > 1e-9:
                raise SystemExit(f"build_external_data: lambda: {f['path']}: {total} / "
                                 f"duration != {rate}")
        ins, outs = f.get("input_lens"), f.get("output_lens")
        if ins is not None and (len(ins) != done or sum(ins) != f["total_input_tokens"]
                                or sum(outs) != f["total_output_tokens"]):
            raise SystemExit(f"build_external_data: lambda: {f['path']}: the copied lengths "
                             "do not add up to the file's totals")
        rows.append({
            "source": "lambdalabs-vllm-benchmark", "source_file": f["path"],
            "commit": f["commit"], "run_id": f["path"].removeprefix("results/")
            .removesuffix(".json"), "date": f"{f['date'][:4]}-{f['date'][4:6]}-{f['date'][6:8]}",
            "model": f["model_id"], "model_raw": f["model_id"], "gpu": gpu,
            "gpu_raw": f"{gpu_raw} (Lambda's name)", "gpu_count": int(count), "tp": int(tp),
            "pp": 1, "nodes": 1, "interconnect": link, "engine": "vllm",
            "engine_version": "0.5.4", "max_num_seqs": 1024, "max_model_len": int(max_len),
            "gpu_memory_utilization": 0.95, "load_kind": "burst",
            "num_prompts": int(n_prompts), "dataset": "ShareGPT_V3_unfiltered_cleaned_split",
            "input_tokens_mean": f["total_input_tokens"] / done,
            "input_tokens_min": min(ins) if ins else None,
            "input_tokens_max": max(ins) if ins else None,
            "output_tokens_mean": f["total_output_tokens"] / done,
            "output_tokens_min": min(outs) if outs else None,
            "output_tokens_max": max(outs) if outs else None,
            "prefix_cache": "cold",  # vLLM 0.5.4: prefix caching off unless enabled
            "completed_rps": f["request_throughput"], "output_tok_s": f["output_throughput"],
            "total_tok_s": (f["total_input_tokens"] + f["total_output_tokens"]) / f["duration"],
            "ttft_mean_ms": f["mean_ttft_ms"], "ttft_p50_ms": f["median_ttft_ms"],
            "ttft_p99_ms": f["p99_ttft_ms"], "tpot_mean_ms": f["mean_tpot_ms"],
            "tpot_p50_ms": f["median_tpot_ms"], "tpot_p99_ms": f["p99_tpot_ms"],
            "itl_mean_ms": f["mean_itl_ms"], "itl_p50_ms": f["median_itl_ms"],
            "itl_p99_ms": f["p99_itl_ms"], "e2e_mean_ms": f["mean_latency_ms"],
            "e2e_p50_ms": f["median_latency_ms"], "e2e_p99_ms": f["p99_latency_ms"],
            "duration_s": f["duration"],
            "metric_note": "input/output_tokens_mean = file totals / completed requests",
        })
    return rows


# --------------------------------------------------------------------------- gpu_conc
# folder -> (catalog GPU, the vendor's name); the MI300X files say "Unknown GPU" (the AMD
# harness could not query it): the folder and its commit ("Add MI300X benchmark results") name it
GPU_CONC = {"H100": ("H100-PCIe", None), "H200": ("H200", None), "b200": ("B200", None),
            "MI300X": ("MI300X", "AMD Instinct MI300X (folder and commit name; the file says "
                                 "Unknown GPU)")}


def build_gpu_conc(repo: Path) -> list[dict[str, Any]]:
    """sariekr/gpu_conc: one GPU serving openai/gpt-oss-20b under the harness's concurrency
    levels; the newest ``benchmark_summary_*.json`` of each GPU folder. The harness feeds one
    request every 0.5 s into a queue that N workers drain, so a level is a closed loop of N in
    flight only while the server cannot keep up with that feed. Little's law tells which: the
    mean number in flight (completed req/s x mean latency) is N there; at the arrival-limited
    levels (the same ~2 req/s load repeated) it is far below N, and those are left out."""
    commit = head_commit(repo)
    files = ls(repo)
    rows: list[dict[str, Any]] = []
    for folder, (gpu, raw_name) in GPU_CONC.items():
        summaries = sorted(f for f in files
                           if re.fullmatch(rf"{folder}/benchmark_summary_\d{{8}}_\d{{6}}\.json", f))
        path = summaries[-1]
        d = json.loads(show(repo, path))
        info = d["test_info"]
        ts = info["timestamp"]
        date = f"{ts[:4]}-{ts[4:6]}-{ts[6:8]}"
        cfg = info["config"]
        for r in d["results"]:
            ok, n = int(r["successful_requests"]), int(r["concurrency"])
            rps, dur = num(r["requests_per_second"]), num(r["test_duration_seconds"])
            if rps is None or dur is None or ok == 0:
                continue
            if abs(rps * dur - ok) > 0.01 * ok:  # the file's rate is completed / duration
                raise SystemExit(f"build_external_data: gpu-conc: {path} concurrency {n}: "
                                 f"{rps} req/s x {dur} s is not {ok} requests")
            e2e = num(r["average_latency_per_request"])
            in_flight = None if e2e is None else rps * e2e / 1000.0
            if in_flight is None or abs(in_flight - n) > 0.1 * n \
                    or int(r["failed_requests"]) > 0:
                continue
            out_tok_s = num(r["system_output_throughput"])
            speed = num(r["median_output_speed_per_query"])
            rows.append({
                "source": "gpu-conc", "source_file": path, "commit": commit,
                "run_id": f"{path.removesuffix('.json')}/concurrency_{n}", "date": date,
                "model": cfg["model"], "model_raw": r["model"],
                "gpu": gpu, "gpu_raw": raw_name or r["gpu_info"]["model"],
                "gpu_count": int(r["gpu_info"]["count"]), "tp": 1, "pp": 1, "nodes": 1,
                "engine": "vllm", "quant": "mxfp4",
                "load_kind": "concurrency", "load_value": n,
                "num_prompts": int(r["total_requests_sent"]),
                "dataset": "gpu_conc synthetic chat prompts (~750 words, target 1000 tokens)",
                "output_tokens_mean": None if out_tok_s is None else out_tok_s * dur / ok,
                "output_tokens_requested": int(cfg["output_tokens"]),
                "prefix_cache": "unknown",
                "completed_rps": rps, "output_tok_s": out_tok_s,
                "ttft_mean_ms": num(r["average_ttft"]), "ttft_p50_ms": num(r["median_ttft"]),
                "ttft_p99_ms": num(r["p99_ttft"]),
                "tpot_p50_ms": None if not speed else 1000.0 / speed,
                "e2e_mean_ms": num(r["average_latency_per_request"]),
                "e2e_p50_ms": num(r["median_end_to_end_latency"]),
                "e2e_p99_ms": num(r["p99_end_to_end_latency"]),
                "duration_s": dur,
                "metric_note": ("output tokens counted as streamed chunks (content and "
                                "reasoning); output_tokens_mean = output tok/s x duration / "
                                "completed; tpot_p50_ms = 1000 / the median per-request "
                                "decode speed (tokens / (end - first token))"),
            })
    return rows


# --------------------------------------------------------------------------- ROCm/vllm
ROCM_README = "docs/dev-docker/README.md"
ROCM_MODELS = {"70B": "amd/Llama-3.1-70B-Instruct-FP8-KV",
               "405B": "amd/Llama-3.1-405B-Instruct-FP8-KV"}


def _rocm_latency_block(text: str) -> str:
    """The README's reproduction command of its latency table (the first fenced block that
    runs ``benchmark_latency.py``)."""
    for block in fences(text):
        if "benchmark_latency.py" in block:
            # one version closes a quoted --compilation-config with a typographic quote
            return block.replace("\u2019", "'").replace("\u2018", "'")
    return ""


def build_rocm_latency(repo: Path) -> list[dict[str, Any]]:
    """ROCm/vllm ``docs/dev-docker/README.md``: AMD's MI300X latency table (vLLM's
    ``benchmark_latency.py``: one offline batch of B prompts of IN random tokens, OUT tokens
    each, mean wall time of 5 iterations). Every version of the file in the mirror's history
    (all refs, oldest first) is read; a measurement (model, B, IN, OUT, latency) is kept once,
    attributed to the commit that first published it and the vLLM version that README names.
    A commit that brings fewer than half of a model's rows as new values (a correction or a
    revert of a few cells, not a new measurement) adds none of them."""
    log = git(repo, "log", "--all", "--reverse", "--format=%H %cI", "--", ROCM_README)
    seen: set[tuple[Any, ...]] = set()
    rows: list[dict[str, Any]] = []
    for line in log.decode().splitlines():
        commit, stamp = line.split()
        try:
            text = show(repo, ROCM_README, commit)
        except subprocess.CalledProcessError:
            continue  # the file is absent at a commit of a side branch
        head = re.search(r"^\| *Model *\|.*Latency \((sec|ms)\) *\|$", text, re.M)
        ver = re.search(r"^[-*]\s*vLLM\s+v?([0-9][^\s,;)]*)", text, re.M)
        if not head or not ver:
            continue
        scale = 1000.0 if head.group(1) == "sec" else 1.0
        flags, env = parse_launch(None, _rocm_latency_block(text))
        extra = [(f"env:{k}", v) for k, v in sorted(env.items()) if k.startswith("VLLM_")]
        extra += [(k.replace("-", "_"), flags.get(k)) for k in ("num-iters-warmup", "num-iters")]
        model_cell, tp_cell = "", ""
        groups: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {}
        for raw in text[head.end():].split("\n")[2:]:
            if not raw.startswith("|"):
                break
            cells = [c.strip() for c in raw.strip().strip("|").split("|")]
            # a model's later rows leave its name and TP size blank
            model_cell, tp_cell = cells[0] or model_cell, cells[2] or tp_cell
            size = re.match(r"Llama 3\.1 (70B|405B)", model_cell)
            bs, inp, out, lat = (num(c) for c in cells[3:7])
            if size is None or None in (bs, inp, out, lat):
                continue
            assert bs is not None and inp is not None and out is not None and lat is not None
            ms = lat * scale
            key = (size.group(1), bs, inp, out, round(ms, 3))
            b, i, o = int(bs), int(inp), int(out)
            groups.setdefault(size.group(1), []).append((key, {
                "source": "rocm-vllm-mi300x-latency", "source_file": ROCM_README,
                "commit": commit,
                "run_id": f"{commit[:12]}/{size.group(1)}/bs{b}_in{i}_out{o}",
                "date": stamp[:10],
                "model": ROCM_MODELS[size.group(1)], "model_raw": model_cell,
                "gpu": "MI300X", "gpu_raw": "AMD Instinct MI300X (192GiB, 750W)",
                "gpu_count": int(tp_cell), "tp": int(tp_cell), "pp": 1, "nodes": 1,
                "interconnect": "AMD Infinity Fabric (8 x MI300X platform)",
                "engine": "vllm", "engine_version": ver.group(1),
                "dtype": flags.get("dtype") or None, "quant": "fp8",
                "kv_cache_dtype": flags.get("kv-cache-dtype") or None,
                "max_model_len": num(flags.get("max-model-len")),
                "gpu_memory_utilization": num(flags.get("gpu-memory-utilization")),
                "engine_args": engine_args_cell(flags, {}, [("offline", "benchmark_latency"),
                                                            *extra]),
                "load_kind": "burst", "num_prompts": b, "dataset": "random token ids",
                "input_tokens_mean": i, "input_tokens_min": i, "input_tokens_max": i,
                "output_tokens_mean": o, "output_tokens_min": o, "output_tokens_max": o,
                "output_tokens_requested": o, "prefix_cache": "unknown",
                "completed_rps": b / (ms / 1000.0), "output_tok_s": b * o / (ms / 1000.0),
                "total_tok_s": b * (i + o) / (ms / 1000.0),
                "e2e_mean_ms": ms, "e2e_p50_ms": ms, "e2e_p99_ms": ms, "duration_s": ms / 1000.0,
                "metric_note": ("offline batch latency (benchmark_latency: mean of the "
                                "iterations' wall time for all B requests, which share one "
                                "length and finish together); rates = B / latency"),
            }))
        for group in groups.values():
            new_rows = [(k, r) for k, r in group if k not in seen]
            seen.update(k for k, _ in group)
            if 2 * len(new_rows) >= len(group):
                rows.extend(r for _, r in new_rows)
    return rows


# --------------------------------------------------------------------------- DeepSeek-R1 (MLA MoE)
DSTACK_COMMIT = "7f37e6697725e58dd09b9ef190b62ce19f01d45e"  # "Add raw_data" (2025-03-18)
DSTACK_DIR = "Deepseek-R1"
# the README's "vLLM-H200" / "vLLM-Mi300" tasks and their `vllm --version` (section "vLLM")
DSTACK_SERVERS = {
    "h200": ("H200", "NVIDIA H200 SXM5", "0.7.4.dev181+gf35f8e22",
             "vllm serve deepseek-ai/DeepSeek-R1 --trust-remote-code --tensor-parallel-size 8",
             {"VLLM_ATTENTION_BACKEND": "FLASHMLA"}),
    "mi300x": ("MI300X", "AMD Instinct MI300X", "0.7.3.dev138+g21f6ca217",
               "vllm serve deepseek-ai/DeepSeek-R1 --tensor-parallel-size 8 "
               "--trust-remote-code --max-model-len 32768",
               {"VLLM_FP8_PADDING": "0", "VLLM_USE_TRITON_FLASH_ATTN": "0"}),
}


def build_dstack_deepseek(repo: Path) -> list[dict[str, Any]]:
    """dstackai/benchmarks ``Deepseek-R1/raw_data/online_results.csv`` at :data:`DSTACK_COMMIT`
    (the folder is gone from later commits): DeepSeek-R1 (FP8) on 8 x H200 and 8 x MI300X, the
    vLLM rows of SGLang's ``bench_serving.py`` (random token prompts of exactly
    ``random_input_len``, ``random_range_ratio`` 1, 500 prompts, a concurrency cap; the script
    ignores end-of-sequence, so every reply is ``random_output_len`` long). The
    ``generated-shared-prefix`` rows (a server restarted with prefix caching, 10 groups sharing a
    2,000-token system prompt) are left out: the fixture has no column for a shared prefix."""
    path = f"{DSTACK_DIR}/raw_data/online_results.csv"
    text = show(repo, path, DSTACK_COMMIT).removeprefix("\ufeff")  # the file starts with a BOM
    rows: list[dict[str, Any]] = []
    for r in csv.DictReader(io.StringIO(text)):
        if r["backend"] != "vllm" or r["dataset_name"] != "random":
            continue
        gpu, gpu_raw, version, launch, env = DSTACK_SERVERS[r["GPU"]]
        flags, _ = parse_launch(None, launch)
        n, conc = int(r["completed"]), int(r["max_concurrency"])
        lin, lout = int(r["random_input_len"]), int(r["random_output_len"])
        if num(r["total_input_tokens"]) != n * lin or num(r["total_output_tokens"]) != n * lout:
            raise SystemExit(f"build_external_data: dstack-deepseek-r1: {r['GPU']} {conc} "
                             f"{lin}/{lout}: token totals are not {n} x the lengths")
        rows.append({
            "source": "dstack-deepseek-r1", "source_file": path, "commit": DSTACK_COMMIT,
            "run_id": f"{r['GPU']}/vllm/random-{lin}-{lout}/concurrency_{conc}",
            "date": "2025-03-18", "model": "deepseek-ai/DeepSeek-R1",
            "gpu": gpu, "gpu_raw": gpu_raw, "gpu_count": 8, "tp": 8, "pp": 1, "nodes": 1,
            "engine": "vllm", "engine_version": version, "quant": "fp8",
            "max_model_len": num(flags.get("max-model-len")),
            "engine_args": engine_args_cell(flags, env) or None,
            "load_kind": "concurrency", "load_value": conc, "num_prompts": n,
            "dataset": "random (SGLang bench_serving, random token ids, range ratio 1)",
            "input_tokens_mean": lin, "input_tokens_min": lin, "input_tokens_max": lin,
            "output_tokens_mean": lout, "output_tokens_min": lout, "output_tokens_max": lout,
            "output_tokens_requested": lout, "prefix_cache": "cold",
            "completed_rps": num(r["request_throughput"]),
            "output_tok_s": num(r["output_throughput"]),
            "total_tok_s": (num(r["input_throughput"]) or 0.0)
            + (num(r["output_throughput"]) or 0.0),
            "ttft_mean_ms": num(r["mean_ttft_ms"]), "ttft_p50_ms": num(r["median_ttft_ms"]),
            "ttft_p99_ms": num(r["p99_ttft_ms"]),
            "tpot_mean_ms": num(r["mean_tpot_ms"]), "tpot_p50_ms": num(r["median_tpot_ms"]),
            "tpot_p99_ms": num(r["p99_tpot_ms"]),
            "itl_mean_ms": num(r["mean_itl_ms"]), "itl_p50_ms": num(r["median_itl_ms"]),
            "itl_p99_ms": num(r["p99_itl_ms"]),
            "e2e_mean_ms": num(r["mean_e2e_latency_ms"]),
            "e2e_p50_ms": num(r["median_e2e_latency_ms"]),
            "e2e_p99_ms": num(r["p99_e2e_latency_ms"]),
            "duration_s": num(r["duration"]),
            "metric_note": "total_tok_s = the file's input + output throughput",
        })
    return rows


GPUSTACK_DOC = "docs/performance-lab/deepseek-r1/h200.md"
# a result block's line labels -> the figures' names (vLLM's `Serving Benchmark Result` print)
_BLOCK_FIELDS = {
    "Successful requests": "completed", "Maximum request concurrency": "conc",
    "Benchmark duration (s)": "duration_s", "Total input tokens": "total_in",
    "Total generated tokens": "total_out", "Request throughput (req/s)": "completed_rps",
    "Output token throughput (tok/s)": "output_tok_s",
    "Total Token throughput (tok/s)": "total_tok_s",
    "Mean TTFT (ms)": "ttft_mean_ms", "Median TTFT (ms)": "ttft_p50_ms",
    "P99 TTFT (ms)": "ttft_p99_ms", "Mean TPOT (ms)": "tpot_mean_ms",
    "Median TPOT (ms)": "tpot_p50_ms", "P99 TPOT (ms)": "tpot_p99_ms",
    "Mean ITL (ms)": "itl_mean_ms", "Median ITL (ms)": "itl_p50_ms",
    "P99 ITL (ms)": "itl_p99_ms",
}


def _result_blocks(fence: str) -> list[tuple[str, dict[str, float]]]:
    """(label, figures) of each ``Serving Benchmark Result`` block of a fence; the label is the
    ``# ...`` comment line above the block (empty where there is none)."""
    out: list[tuple[str, dict[str, float]]] = []
    label, cur = "", None
    for line in fence.splitlines():
        s = line.strip()
        if s.startswith("# "):
            label = s[2:].strip()
        elif "Serving Benchmark Result" in s:
            cur = {}
            out.append((label, cur))
            label = ""
        elif cur is not None and ":" in s:
            key, _, val = s.rpartition(":")
            if key.strip() in _BLOCK_FIELDS and num(val) is not None:
                cur[_BLOCK_FIELDS[key.strip()]] = float(val)
    return out


def build_gpustack_deepseek(repo: Path) -> list[dict[str, Any]]:
    """gpustack/gpustack ``docs/performance-lab/deepseek-r1/h200.md``: DeepSeek-R1-0528 (FP8)
    on 8 x H200 SXM, vLLM v0.11.0 started as ``vllm serve deepseek-ai/DeepSeek-R1-0528 -tp 8``,
    measured with ``vllm bench serve --backend openai-chat`` (all prompts at once unless a
    concurrency is printed). Only the blocks measured on that vLLM server (a fence of results
    after a ``vllm serve`` fence; SGLang and TensorRT-LLM blocks are left out). Random prompts
    are the doc's stated lengths (vLLM's random dataset: fixed lengths, here without
    ``--ignore-eos``, yet every reply reached its length: total generated = prompts x length)."""
    commit = head_commit(repo)
    text = show(repo, GPUSTACK_DOC)
    server = ""
    rows: list[dict[str, Any]] = []
    for fence in fences(text):
        if "Serving Benchmark Result" not in fence:
            if re.search(r"\b(vllm serve|sglang\.launch_server|trtllm-serve)\b", fence):
                server = fence
            continue
        if not re.search(r"\bvllm serve deepseek-ai/DeepSeek-R1-0528 -tp 8\s*$", server.strip()):
            continue
        for label, f in _result_blocks(fence):
            n = int(f["completed"])
            if label == "" or label.lower().startswith("sharegpt"):
                dataset = "sharegpt"
            elif re.fullmatch(r"random \d+K? input", label):
                dataset = "random"
            else:
                raise SystemExit(f"build_external_data: gpustack: block {label!r} unknown")
            conc = f.get("conc")
            lout = f["total_out"] / n
            rows.append({
                "source": "gpustack-deepseek-r1-h200", "source_file": GPUSTACK_DOC,
                "commit": commit,
                "run_id": f"vllm/{label or 'sharegpt'}".replace(" ", "-"),
                "date": "2025-10-31", "model": "deepseek-ai/DeepSeek-R1-0528",
                "gpu": "H200", "gpu_raw": "NVIDIA H200 SXM", "gpu_count": 8, "tp": 8, "pp": 1,
                "nodes": 1, "engine": "vllm", "engine_version": "0.11.0", "quant": "fp8",
                "load_kind": "concurrency" if conc else "burst",
                "load_value": int(conc) if conc else None, "num_prompts": n,
                "dataset": dataset, "input_tokens_mean": f["total_in"] / n,
                "output_tokens_mean": lout,
                "prefix_cache": "cold", "completed_rps": f.get("completed_rps"),
                "output_tok_s": f.get("output_tok_s"), "total_tok_s": f.get("total_tok_s"),
                **{k: f.get(k) for k in ("ttft_mean_ms", "ttft_p50_ms", "ttft_p99_ms",
                                         "tpot_mean_ms", "tpot_p50_ms", "tpot_p99_ms",
                                         "itl_mean_ms", "itl_p50_ms", "itl_p99_ms",
                                         "duration_s")},
            })
    return rows


# --------------------------------------------------------------------------- registry
# slug -> (mirror folder under --mirrors, or a file under data/external/raw/, builder)
SOURCES: dict[str, tuple[str, Callable[[Path], list[dict[str, Any]]]]] = {
    "4x3090-llm-benchmarks": ("LottoLottoLotto+4x3090-llm-benchmarks", build_4x3090),
    "llm-bench-2x4090": ("MadCodeTX+llm-bench-2x4090", build_2x4090),
    "lambdalabs-vllm-benchmark": ("raw:lambdalabs-vllm-benchmark.json", build_lambda),
    "gpu-conc": ("sariekr+gpu_conc", build_gpu_conc),
    "rocm-vllm-mi300x-latency": ("ROCm+vllm", build_rocm_latency),
    "dstack-deepseek-r1": ("dstackai+benchmarks", build_dstack_deepseek),
    "gpustack-deepseek-r1-h200": ("gpustack+gpustack", build_gpustack_deepseek),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args(argv)
    for slug, (mirror, build) in SOURCES.items():
        if args.only and slug not in args.only:
            continue
        if mirror.startswith("raw:"):
            repo = OUT / "raw" / mirror.removeprefix("raw:")
        else:
            repo = args.mirrors / mirror / "repo"
        if not repo.exists():
            print(f"build_external_data: {slug}: no mirror at {repo}; kept the committed CSV",
                  file=sys.stderr)
            continue
        rows = build(repo)
        path = write_csv(slug, rows)
        print(f"{path.relative_to(ROOT)}: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
