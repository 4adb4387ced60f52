"""Reading measured runs from result files into typed records (one registry of formats).

Main entries: :func:`read_runs` (one file -> records + one-line errors), :func:`ingest_paths`
(files and folders -> an :class:`IngestReport`, store updated in memory), :func:`register_format`.

Formats:
- ``vllm``: vLLM serving-benchmark results, both ``benchmarks/benchmark_serving.py`` of vLLM 0.8.x
  (with its ``request_goodput:`` key) and the current ``vllm bench serve`` result JSON (``failed``,
  ``max_concurrent_requests``, per-request ``ttfts``/``itls``/``input_lens``/``output_lens`` in
  seconds); also fleetplan's own ``bench`` output, which uses that shape plus ``gpu``/``gpu_count``.
- more formats register themselves with :func:`register_format`.

A file may hold one JSON object or several, one per line (vLLM's ``--append-result``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from fleetplan.catalog.gpus import normalize_gpu
from fleetplan.catalog.models import normalize_model
from fleetplan.errors import FleetplanError, InputError, UnknownNameError
from fleetplan.profiles.record import BenchmarkRun
from fleetplan.profiles.schema import LATENCY_METRICS

# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class IngestOptions:
    """Facts a result file may lack, given by the user (CLI flags)."""

    gpu: str | None = None
    gpu_count: int | None = None
    engine_version: str | None = None
    dataset: str | None = None


@dataclass(frozen=True)
class IngestFormat:
    name: str
    detect: Callable[[dict[str, Any]], bool]
    parse: Callable[[dict[str, Any], SourceRef, IngestOptions], dict[str, Any]]


@dataclass(frozen=True)
class SourceRef:
    path: Path
    line: int
    digest: str


_FORMATS: dict[str, IngestFormat] = {}


def register_format(fmt: IngestFormat) -> IngestFormat:
    """Add an ingest format; a duplicate name is refused."""
    if fmt.name in _FORMATS:
        raise ValueError(f"ingest format {fmt.name!r} is already registered")
    _FORMATS[fmt.name] = fmt
    return fmt


def formats() -> list[str]:
    return list(_FORMATS)


def get_format(name: str) -> IngestFormat:
    if name not in _FORMATS:
        raise UnknownNameError("ingest format", name, _FORMATS)
    return _FORMATS[name]


# --------------------------------------------------------------------------- errors


class RecordError(InputError):
    """One record of one file was refused; the message names file, line and field."""


def _fail(src: SourceRef, field_name: str | None, msg: str) -> RecordError:
    where = f"{src.path}: line {src.line}"
    return RecordError(f"{where}: field {field_name}: {msg}" if field_name else f"{where}: {msg}")


# --------------------------------------------------------------------------- vLLM


def _is_vllm(obj: dict[str, Any]) -> bool:
    return "request_throughput" in obj and ("mean_ttft_ms" in obj or "ttfts" in obj)


_DATASETS = ("sharegpt", "sonnet", "random", "burstgpt", "hf", "custom", "instructcoder")


def _dataset_from_name(path: Path) -> str | None:
    tokens = re.split(r"[_\-.]", path.stem.lower())
    return next((d for d in _DATASETS if d in tokens), None)


def _num(obj: dict[str, Any], key: str, src: SourceRef, *, required: bool = True) -> Any:
    if key not in obj or obj[key] is None:
        if required:
            raise _fail(src, None, f"missing required field {key!r}")
        return None
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise _fail(src, key, f"{v!r} is not a number")
    try:
        f = float(v)
    except ValueError:
        raise _fail(src, key, f"{v!r} is not a number") from None
    if math.isnan(f) or (math.isinf(f) and key != "request_rate"):
        raise _fail(src, key, f"{v!r} is not a finite number")
    if f < 0:
        raise _fail(src, key, f"{v!r} must be >= 0")
    return f


_VLLM_LAT = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2el"}
_STAT_KEYS = {"mean": "mean_{m}_ms", "std": "std_{m}_ms", "p50": "median_{m}_ms",
              "p90": "p90_{m}_ms", "p95": "p95_{m}_ms", "p99": "p99_{m}_ms",
              "p100": "p100_{m}_ms"}


def _stats_from_samples(samples_ms: np.ndarray) -> dict[str, float]:
    if samples_ms.size == 0:
        return {}
    q = np.percentile(samples_ms, [50, 90, 95, 99, 100])
    return {"mean": float(samples_ms.mean()), "std": float(samples_ms.std()),
            "p50": float(q[0]), "p90": float(q[1]), "p95": float(q[2]), "p99": float(q[3]),
            "p100": float(q[4])}


def _per_request_samples(obj: dict[str, Any], src: SourceRef) -> dict[str, np.ndarray]:
    """Latency samples (ms) from vLLM's per-request arrays (seconds), successful requests only."""
    if "ttfts" not in obj:
        return {}
    try:
        ttfts = np.asarray(obj.get("ttfts") or [], dtype=float)
        itls = [np.asarray(x or [], dtype=float) for x in obj.get("itls") or []]
        outs = np.asarray(obj.get("output_lens") or [], dtype=float)
    except (TypeError, ValueError):
        raise _fail(src, "ttfts", "per-request arrays are not numeric") from None
    errors = obj.get("errors") or [""] * len(ttfts)
    ok = np.array([not e for e in errors][: len(ttfts)], dtype=bool)
    if not np.all(np.isfinite(ttfts)):
        raise _fail(src, "ttfts", "holds a non-finite value")
    out: dict[str, np.ndarray] = {"ttft": ttfts[ok] * 1e3}
    if itls:
        flat = [x for i, arr in enumerate(itls) if i < len(ok) and ok[i] for x in arr]
        out["itl"] = np.asarray(flat) * 1e3
        e2e = [ttfts[i] + arr.sum() for i, arr in enumerate(itls) if i < len(ok) and ok[i]]
        out["e2e"] = np.asarray(e2e) * 1e3
        if outs.size == len(itls):
            tpot = [arr.sum() / (outs[i] - 1) for i, arr in enumerate(itls)
                    if i < len(ok) and ok[i] and outs[i] > 1]
            out["tpot"] = np.asarray(tpot) * 1e3
    return out


# vLLM's `backend` names the client's API flavour ("vllm", "openai", "openai-chat"), which
# vLLM's own server speaks; other values name another server (e.g. "tgi", "sglang").
_VLLM_BACKENDS = {"vllm", "openai", "openai-chat", "openai-audio"}


def _engine(obj: dict[str, Any]) -> str:
    if obj.get("engine"):
        return str(obj["engine"])
    backend = str(obj.get("backend") or "vllm")
    return "vllm" if backend in _VLLM_BACKENDS else backend


MAX_GPUS = 1024  # GPUs of one server: more is a typo, not a configuration


def _whole(src: SourceRef, field: str, raw: Any, most: int) -> int:
    """A whole number 1..most given as an int or its digits; anything else refuses the record."""
    text = str(raw).strip()
    if isinstance(raw, bool) or not isinstance(raw, (int, str)) or not text.isdigit():
        raise _fail(src, field, f"{raw!r} is not a whole number")
    if len(text) > 6 or not 1 <= int(text) <= most:
        raise _fail(src, field, f"{raw!r} must be between 1 and {most}")
    return int(text)


def _parse_vllm(obj: dict[str, Any], src: SourceRef, opt: IngestOptions) -> dict[str, Any]:
    model_id = obj.get("model_id") or obj.get("model")
    if not isinstance(model_id, str) or not model_id:
        raise _fail(src, None, "missing required field 'model_id'")
    gpu_raw = opt.gpu or obj.get("gpu") or obj.get("gpu_name")
    if not gpu_raw:
        raise _fail(src, None, "missing required field 'gpu_name' (give the GPU with --gpu)")
    try:
        gpu = normalize_gpu(str(gpu_raw))
    except UnknownNameError as exc:
        raise _fail(src, "gpu_name", str(exc)) from None
    count_raw = opt.gpu_count or obj.get("gpu_count")
    if count_raw is None:
        raise _fail(src, None, "missing required field 'gpu_count' (give it with --gpu-count)")
    gpu_count = _whole(src, "gpu_count", count_raw, MAX_GPUS)
    tp_field = "tensor_parallel_size" if "tensor_parallel_size" in obj else "tp_size"
    tp_raw = obj.get(tp_field)
    tp = gpu_count if tp_raw is None else _whole(src, tp_field, tp_raw, gpu_count)

    rec: dict[str, Any] = {
        "run_id": src.digest,
        "model": normalize_model(model_id),
        "model_id": model_id,
        "gpu": gpu,
        "gpu_count": gpu_count,
        "tp_size": tp,
        "config": f"{gpu_count}x{gpu}",
        "engine": _engine(obj),
        "engine_version": (opt.engine_version or obj.get("engine_version")
                           or obj.get("vllm_version")),
        "date": str(obj["date"]) if obj.get("date") else None,
        "source_format": "vllm",
        "source_file": src.path.name,
        "source_line": src.line,
        "num_prompts": int(_num(obj, "num_prompts", src)),
        "request_rate": _num(obj, "request_rate", src),
        "burstiness": _num(obj, "burstiness", src, required=False) or 1.0,
        "max_concurrency": obj.get("max_concurrency"),
        "dataset": opt.dataset or obj.get("dataset_name") or _dataset_from_name(src.path),
        "duration_s": _num(obj, "duration", src),
        "completed": int(_num(obj, "completed", src)),
        "total_input_tokens": int(_num(obj, "total_input_tokens", src)),
        "total_output_tokens": int(_num(obj, "total_output_tokens", src)),
        "request_throughput": _num(obj, "request_throughput", src),
        "output_throughput": _num(obj, "output_throughput", src),
        "total_token_throughput": _num(obj, "total_token_throughput", src),
        "partial": bool(obj.get("partial", False)),
    }
    if rec["max_concurrency"] is not None:
        rec["max_concurrency"] = int(_num(obj, "max_concurrency", src))
    failed = _num(obj, "failed", src, required=False)
    rec["failed"] = int(failed) if failed is not None else max(0, rec["num_prompts"]
                                                               - rec["completed"])
    goodput_key = "request_goodput" if "request_goodput" in obj else "request_goodput:"
    rec["request_goodput"] = _num(obj, goodput_key, src, required=False)

    samples = _per_request_samples(obj, src)
    for metric in LATENCY_METRICS:
        vkey = _VLLM_LAT[metric]
        derived = _stats_from_samples(samples[metric]) if metric in samples else {}
        for stat, pattern in _STAT_KEYS.items():
            key = pattern.format(m=vkey)
            value = _num(obj, key, src, required=False)
            if value is None and stat == "p50":
                value = _num(obj, f"p50_{vkey}_ms", src, required=False)
            if value is None:
                value = derived.get(stat)
            rec[f"{metric}_{stat}_ms"] = value
    for key in ("gpu_energy_j", "gpu_avg_power_w"):
        rec[key] = _num(obj, key, src, required=False)
    return rec


register_format(IngestFormat("vllm", _is_vllm, _parse_vllm))


# --------------------------------------------------------------------------- files


def _objects(path: Path) -> Iterator[tuple[int, str, Any]]:
    """(line, raw text, parsed object or exception) for each JSON record of a file."""
    text = path.read_text(encoding="utf-8", errors="strict")
    stripped = text.strip()
    if not stripped:
        yield 1, "", ValueError("file is empty")
        return
    try:
        yield 1, stripped, json.loads(stripped)
        return
    except json.JSONDecodeError:
        pass
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield i, line.strip(), json.loads(line)
        except json.JSONDecodeError as exc:
            yield i, line.strip(), exc


def record_digest(obj: Any) -> str:
    """A short SHA-256 of the canonical JSON of ``obj`` (names a record by its content)."""
    canon = json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def read_runs(path: str | os.PathLike[str],
              options: IngestOptions | None = None) -> tuple[list[BenchmarkRun], list[str]]:
    """Parse one result file: the runs it holds and a one-line error for each refused record."""
    p = Path(path)
    opt = options or IngestOptions()
    runs: list[BenchmarkRun] = []
    errors: list[str] = []
    try:
        items = list(_objects(p))
    except (OSError, UnicodeDecodeError) as exc:
        return [], [f"{p}: cannot read ({exc.__class__.__name__}: {exc})"]
    for line, _raw, obj in items:
        if isinstance(obj, Exception):
            msg = obj.msg if isinstance(obj, json.JSONDecodeError) else str(obj)
            errors.append(f"{p}: line {line}: not valid JSON ({msg})")
            continue
        objs = obj if isinstance(obj, list) else [obj]
        for sub in objs:
            src = SourceRef(p, line, record_digest(sub))
            try:
                runs.extend(_parse_object(sub, src, opt))
            except FleetplanError as exc:
                errors.append(str(exc))
    return runs, errors


def _parse_object(obj: Any, src: SourceRef, opt: IngestOptions) -> list[BenchmarkRun]:
    if not isinstance(obj, dict):
        raise _fail(src, None, f"expected a JSON object, found {type(obj).__name__}")
    fmt = next((f for f in _FORMATS.values() if f.detect(obj)), None)
    if fmt is None:
        raise _fail(src, None, "not a recognised result (formats: " + ", ".join(_FORMATS) + ")")
    recs = fmt.parse(obj, src, opt)
    out = []
    for rec in recs if isinstance(recs, list) else [recs]:
        try:
            out.append(BenchmarkRun.model_validate({k: v for k, v in rec.items() if v is not None}))
        except ValidationError as exc:
            err = exc.errors()[0]
            name = ".".join(str(x) for x in err["loc"])
            raise _fail(src, name, f"{err.get('input')!r}: {err['msg']}") from None
    return out


def walk(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files named, and ``*.json`` files under folders named, in a stable order."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out.extend(sorted(q for q in p.rglob("*.json") if q.is_file()))
        else:
            out.append(p)
    return out


@dataclass
class IngestReport:
    files: int = 0
    added: list[BenchmarkRun] = field(default_factory=list)
    duplicates: int = 0
    errors: list[str] = field(default_factory=list)


def ingest_paths(paths: Iterable[str | os.PathLike[str]], store: Any,
                 options: IngestOptions | None = None) -> IngestReport:
    """Read every file (folders walked) and add new runs to ``store`` (in memory)."""
    report = IngestReport()
    found: list[BenchmarkRun] = []
    for p in walk(paths):
        report.files += 1
        if not p.exists():
            report.errors.append(f"{p}: no such file or folder")
            continue
        runs, errors = read_runs(p, options)
        report.errors.extend(errors)
        found.extend(runs)
    report.added = store.add(found)
    report.duplicates = len(found) - len(report.added)
    return report
from fleetplan.profiles import guidellm as _guidellm  # noqa: E402,F401  (registers "guidellm")
