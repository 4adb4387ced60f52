"""Reading measured runs from result files into typed records, and the ``vllm`` format.

Main entries: :func:`read_runs` (one file -> records + one-line errors), :func:`ingest_paths`
(files and folders -> an :class:`IngestReport`, store updated in memory). The formats are those
of the ingest-format registry (:mod:`fleetplan.profiles.formats`, :func:`ingest_format`); this
module registers ``vllm``.

Formats:
- ``vllm``: vLLM serving-benchmark results of 0.6.x and 0.8.x ``benchmarks/benchmark_serving.py``
  and of the current ``vllm bench serve``, with or without per-request arrays, and fleetplan's own
  ``bench`` output; every field read goes through the typed, bounded schema of
  :mod:`fleetplan.profiles.vllm`. GPU and parallel degree come from the options or the file;
  pipeline-, data-parallel and multi-node runs are refused.
- ``guidellm``: GuideLLM reports (:mod:`fleetplan.profiles.guidellm`).
- more formats register themselves with :func:`ingest_format` (re-exported here).

Files are read through the bounded reader (:mod:`fleetplan._load`: regular files only, size,
depth and duplicate-key limits). Every refusal is one line naming file, line, field and value;
one file (or record) that fails, even by crashing its reader, never costs the others.

A file may hold one JSON object or several, one per line (vLLM's ``--append-result``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fleetplan.catalog.models import normalize_model
from fleetplan.errors import FleetplanError
from fleetplan.profiles.formats import (
    FORMATS,
    IngestFormat,
    IngestOptions,
    RecordError,
    SourceRef,
    check_model,
    formats,
    get_format,
    ingest_format,
    record_digest,
    register_format,
    resolve_gpu,
    server_fields,
)
from fleetplan.profiles.formats import record_error as _fail
from fleetplan.profiles.record import BenchmarkRun
from fleetplan.profiles.request_lengths import usable_lengths
from fleetplan.profiles.schema import LATENCY_METRICS
from fleetplan.profiles.vllm import (
    MAX_GPUS,
    STAT_KEYS,
    VLLM_METRICS,
    VllmResult,
    check_result,
    first_problem,
    per_request_samples,
    short,
    stats_from_samples,
)

__all__ = [
    "FORMATS", "IngestFormat", "IngestOptions", "IngestReport", "RecordError", "SourceRef",
    "check_model", "formats", "get_format", "ingest_format", "ingest_paths", "read_runs",
    "record_digest", "register_format", "resolve_gpu", "walk",
]

# --------------------------------------------------------------------------- vLLM


def _is_vllm(obj: dict[str, Any]) -> bool:
    return "request_throughput" in obj and ("mean_ttft_ms" in obj or "ttfts" in obj)


_DATASETS = ("sharegpt", "sonnet", "random", "burstgpt", "hf", "custom", "instructcoder")


def _dataset_from_name(path: Path) -> str | None:
    tokens = re.split(r"[_\-.]", path.stem.lower())
    return next((d for d in _DATASETS if d in tokens), None)


# vLLM's `backend` names the client's API flavour ("vllm", "openai", "openai-chat"), which
# vLLM's own server speaks; other values name another server (e.g. "tgi", "sglang").
_VLLM_BACKENDS = {"vllm", "openai", "openai-chat", "openai-audio"}


def _engine(res: VllmResult) -> str:
    if res.engine:
        return res.engine
    backend = res.backend or res.endpoint_type or "vllm"
    return "vllm" if backend in _VLLM_BACKENDS else backend


def _parallelism(res: VllmResult, src: SourceRef, opt: IngestOptions
                 ) -> tuple[int, int, dict[str, Any]]:
    """(GPUs of the server, tensor-parallel size, its layout: ``pp_size``, ``dp``, ``nodes``,
    ``interconnect`` where not 1 / stated) from the user's description and the file (a
    contradiction between them refused, naming both); a server laid out as pipeline stages,
    data-parallel replicas or several nodes is refused unless ``opt.layouts`` (validate)."""
    sd, where = opt.described(), f"{src.path}: line {src.line}: "
    pp_field = "pipeline_parallel_size" if res.pipeline_parallel_size is not None else "pp_size"
    nodes_field = "num_nodes" if res.num_nodes is not None else "nnodes"
    pp = sd.pick("pp", getattr(res, pp_field), pp_field, where)
    nodes = sd.pick("nodes", getattr(res, nodes_field), nodes_field, where)
    dp = sd.pick("dp", res.data_parallel_size, "data_parallel_size", where)
    layout: dict[str, Any] = {}
    if not opt.layouts:
        for key in ("pipeline_parallel_size", "pp_size"):
            if (getattr(res, key) or 1) > 1:
                raise _fail(src, key, f"{getattr(res, key)}: pipeline-parallel runs are not "
                            "kept in the profile store (one tensor-parallel group on one node "
                            "per run); validate models them")
        if (res.data_parallel_size or 1) > 1:
            raise _fail(src, "data_parallel_size", f"{res.data_parallel_size}: a "
                        "data-parallel run measures several replicas behind one endpoint; "
                        "ingest one replica's run (validate models it)")
        for key in ("num_nodes", "nnodes"):
            if (getattr(res, key) or 1) > 1:
                raise _fail(src, key, f"{getattr(res, key)}: multi-node runs are not kept in "
                            "the profile store; validate models them")
        sd.check_storable(where=where)
    else:
        sd.check_modelled(nodes=nodes, where=where)
        layout = {k: v for k, v in (("pp_size", pp), ("dp", dp), ("nodes", nodes))
                  if v is not None and v > 1}
        if sd.interconnect is not None:
            layout["interconnect"] = sd.interconnect
    groups = int(layout.get("pp_size", 1)) * int(layout.get("dp", 1))
    tp_field = "tensor_parallel_size" if res.tensor_parallel_size is not None else "tp_size"
    tp = sd.pick("tp", getattr(res, tp_field), tp_field, where)
    if sd.tp is not None:
        tp_field = sd.name("tp")
    count_field = sd.name("gpu_count") if sd.gpu_count else "gpu_count"
    count = sd.pick("gpu_count", res.gpu_count, "gpu_count", where) or (
        tp * groups if tp is not None else None)
    if count is None:
        raise _fail(src, None, "missing required field 'gpu_count' (give it with --gpu-count)")
    if not 1 <= count <= MAX_GPUS:
        raise _fail(src, count_field, f"{count} must be between 1 and {MAX_GPUS}")
    if tp is None:
        return count, count // groups if groups > 1 else count, layout
    if not 1 <= tp <= count:
        raise _fail(src, tp_field, f"{tp} must be between 1 and {count} (the GPU count)")
    return count, tp, layout


def _config(gpu: str, count: int, tp: int, layout: dict[str, Any], src: SourceRef,
            opt: IngestOptions) -> str:
    """The run's configuration name: ``<count>x<GPU>``, with a layout suffix for pipeline
    stages, data-parallel replicas or several nodes (:mod:`fleetplan.catalog.hardware`)."""
    if not layout:
        return f"{count}x{gpu}"
    from fleetplan.catalog.hardware import HardwareConfig

    try:
        return HardwareConfig.model_validate(
            {"gpu": gpu, "gpu_count": count, "tp_size": tp, **layout},
            context={"catalog": opt.names}).name
    except ValidationError as exc:
        msg = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise _fail(src, "gpu_count", f"{count}: {msg}") from None


def _gpu(res: VllmResult, src: SourceRef, opt: IngestOptions) -> str:
    """The catalog name of the run's GPU: the user's (--gpu) or the file's; both given and
    naming different GPUs: refused, naming both. A file's name the catalog does not know is
    no contradiction when the user names the GPU (the user describes it)."""
    sd = opt.described()
    file_field = "gpu" if res.gpu else "gpu_name"
    file_raw = res.gpu or res.gpu_name
    if sd.gpu is None:
        if not file_raw:
            raise _fail(src, None, "missing required field 'gpu_name' (give the GPU with --gpu)")
        return resolve_gpu(src, file_field, file_raw, opt)
    mine = resolve_gpu(src, sd.name("gpu"), sd.gpu, opt)
    if file_raw:
        try:
            theirs = resolve_gpu(src, file_field, file_raw, opt)
        except FleetplanError:
            return mine
        if theirs != mine:
            raise _fail(src, file_field, f"{file_raw} ({theirs}) contradicts "
                        f"{sd.name('gpu')} {sd.gpu} ({mine})")
    return mine


@ingest_format("vllm", detect=_is_vllm)
def _parse_vllm(obj: dict[str, Any], src: SourceRef, opt: IngestOptions) -> dict[str, Any]:
    res, problem = check_result(obj)
    if problem is not None:
        raise _fail(src, *problem)
    assert res is not None
    model_id = res.model_id or res.model
    if not model_id:
        raise _fail(src, None, "missing required field 'model_id'")
    gpu = _gpu(res, src, opt)
    gpu_count, tp, layout = _parallelism(res, src, opt)
    # a bare name (no org, no folder) is a --served-model-name: the tokenizer names the
    # checkpoint then; a hub id or a path names it itself
    served = "/" not in model_id and "\\" not in model_id
    tokenizer = normalize_model(res.tokenizer_id) if served and res.tokenizer_id else None
    model = check_model(src, normalize_model(model_id), opt, tokenizer)
    rec: dict[str, Any] = {
        "run_id": src.digest,
        "model": model,
        "model_id": model_id,
        "gpu": gpu,
        "gpu_count": gpu_count,
        "tp_size": tp,
        "config": _config(gpu, gpu_count, tp, layout, src, opt),
        "engine": _engine(res),
        "engine_version": opt.described().pick(
            "engine_version", res.engine_version or res.vllm_version,
            "engine_version" if res.engine_version else "vllm_version",
            f"{src.path}: line {src.line}: "),
        "date": res.date,
        "source_format": "vllm",
        "source_file": src.path.name,
        "source_line": src.line,
        "num_prompts": res.num_prompts,
        "request_rate": res.request_rate,
        "burstiness": res.burstiness or 1.0,
        "max_concurrency": res.max_concurrency,
        "dataset": opt.dataset or res.dataset_name or _dataset_from_name(src.path),
        "duration_s": res.duration,
        "completed": res.completed,
        "failed": res.failed if res.failed is not None else res.num_prompts - res.completed,
        "total_input_tokens": res.total_input_tokens,
        "total_output_tokens": res.total_output_tokens,
        "request_throughput": res.request_throughput,
        "output_throughput": res.output_throughput,
        "total_token_throughput": res.total_token_throughput,
        "request_goodput": (res.request_goodput if res.request_goodput is not None
                            else res.request_goodput_colon),
        "gpu_energy_j": res.gpu_energy_j,
        "gpu_avg_power_w": res.gpu_avg_power_w,
        "partial": res.partial,
        **server_fields(src, opt, obj),
    }
    lens = usable_lengths(res.input_lens, res.output_lens, num_prompts=res.num_prompts,
                          completed=res.completed, partial=res.partial)
    if lens is not None:
        rec["input_lens"], rec["output_lens"] = lens
    samples = per_request_samples(res)
    for metric in LATENCY_METRICS:
        vkey = VLLM_METRICS[metric]
        derived = stats_from_samples(samples[metric]) if metric in samples else {}
        for name, pattern in STAT_KEYS.items():
            value = res.stat(pattern.format(m=vkey))
            if value is None and name == "p50":
                value = res.stat(f"p50_{vkey}_ms")
            if value is None:
                value = derived.get(name)
            rec[f"{metric}_{name}_ms"] = value
    return rec



# --------------------------------------------------------------------------- files


MAX_FILE_BYTES = 256 * 2**20  # a 10,000-request detailed result is ~20 MB
MAX_DEPTH = 64  # vLLM result files nest 3 deep, GuideLLM reports about 10


class _Bad(ValueError):
    """A record that is not JSON, or nests too deeply: the message is the whole error line."""


def _parse_json(text: str, src: str) -> Any:
    """One JSON value (the bounded reader: depth, duplicate keys, no RecursionError), else
    :class:`_Bad` with the line to print."""
    from fleetplan._load import load_json

    try:
        return load_json(text, what="result file", source=src, max_bytes=MAX_FILE_BYTES,
                         max_depth=MAX_DEPTH)
    except FleetplanError as exc:
        raise _Bad(str(exc)) from None


def _objects(path: Path) -> Iterator[tuple[int, Any]]:
    """(line, parsed object or :class:`_Bad`) for each JSON record of a file: the whole file
    as one JSON value, else one value per non-blank line (vLLM's ``--append-result``). The
    file must be a regular file (a FIFO or device is refused by its type, never opened)."""
    from fleetplan._load import read_text_bounded

    text = read_text_bounded(path, what="result file", max_bytes=MAX_FILE_BYTES)
    stripped = text.strip()
    if not stripped:
        yield 1, _Bad(f"{path}: line 1: the file is empty")
        return
    try:
        yield 1, _parse_json(stripped, str(path))
        return
    except _Bad as whole:
        if "\n" not in stripped or "not JSON" not in str(whole):
            yield 1, whole
            return
    for i, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                yield i, _parse_json(line, f"{path}: line {i}")
            except _Bad as exc:
                yield i, exc


def read_runs(path: str | os.PathLike[str],
              options: IngestOptions | None = None) -> tuple[list[BenchmarkRun], list[str]]:
    """Parse one result file: the runs it holds and a one-line error for each refused record
    (a file that cannot be read at all is one line). Never raises for what the file holds."""
    p = Path(path)
    opt = options or IngestOptions()
    runs: list[BenchmarkRun] = []
    errors: list[str] = []
    try:
        items = list(_objects(p))
    except FleetplanError as exc:
        return [], [str(exc)]
    for line, obj in items:
        if isinstance(obj, _Bad):
            errors.append(str(obj))
            continue
        objs = obj if isinstance(obj, list) else [obj]
        for sub in objs:
            try:
                src = SourceRef(p, line, record_digest(sub))
                runs.extend(_parse_object(sub, src, opt))
            except FleetplanError as exc:
                errors.append(str(exc))
            except Exception as exc:  # a bug must cost this record only, never the others
                errors.append(f"{p}: line {line}: cannot read this record "
                              f"({type(exc).__name__}: {short(str(exc), 120)})")
    return runs, errors


def _parse_object(obj: Any, src: SourceRef, opt: IngestOptions) -> list[BenchmarkRun]:
    if not isinstance(obj, dict):
        raise _fail(src, None, f"expected a JSON object, found {type(obj).__name__}")
    fmt = next((f for f in FORMATS.values() if f.detect(obj)), None)
    if fmt is None:
        raise _fail(src, None, "not a recognised result (formats: " + ", ".join(FORMATS) + ")")
    recs = fmt.parse(obj, src, opt)
    out = []
    for rec in recs if isinstance(recs, list) else [recs]:
        try:
            out.append(BenchmarkRun.model_validate({k: v for k, v in rec.items() if v is not None}))
        except ValidationError as exc:
            raise _fail(src, *first_problem(exc)) from None
    return out


def walk(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files named, and ``*.json`` entries under folders named (symlinked folders not followed,
    so a link loop cannot recurse), in a stable order."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found: list[Path] = []
            for root, dirs, files in os.walk(p):
                dirs.sort()
                found.extend(Path(root) / f for f in files if f.endswith(".json"))
            out.extend(sorted(found))
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
    """Read every file (folders walked) and add new runs to ``store`` (in memory). Each file
    is read on its own: one that cannot be read, or crashes its reader, is one line in
    ``errors`` and every good record of the others is added."""
    report = IngestReport()
    found: list[BenchmarkRun] = []
    for p in walk(paths):
        report.files += 1
        try:
            runs, errors = read_runs(p, options)
        except Exception as exc:  # never lose the other files' records to one file
            runs, errors = [], [f"{p}: cannot be read ({type(exc).__name__}: "
                                f"{short(str(exc), 120)})"]
        report.errors.extend(errors)
        found.extend(runs)
    report.added = store.add(found)
    report.duplicates = len(found) - len(report.added)
    return report
