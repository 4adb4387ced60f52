"""GuideLLM run reports (the JSON that ``guidellm benchmark`` saves) as measured runs.

Registers the ingest format ``guidellm`` (:func:`fleetplan.profiles.formats.ingest_format`); main
entry :func:`parse_report` (one report -> one store record per benchmark it holds). Reads the
report of GuideLLM 0.4+ (``benchmarks[].config.strategy``, ``scheduler_metrics``, ``metrics``) and
of 0.2/0.3 (``benchmarks[].args.strategy``, ``run_stats``, ``worker.backend_model``).

How GuideLLM's figures map to the store (vLLM's definitions):

- strategy ``poisson`` at rate r: ``request_rate`` r, burstiness 1. ``synchronous``: rate inf with
  ``max_concurrency`` 1; ``concurrent`` (n streams): rate inf, ``max_concurrency`` n;
  ``throughput``: rate inf (its ``max_concurrency`` if set). ``constant`` rates (evenly spaced
  arrivals, a gamma shape of infinity) are refused: the store's burstiness must be finite.
- counts: ``completed`` = successful, ``failed`` = errored, ``num_prompts`` = all requests of the
  measured window (incomplete ones, cut at the end of the run, count there and nowhere else).
- ``ttft``: ``time_to_first_token_ms``; ``e2e``: ``request_latency`` (s -> ms).
- ``tpot`` (vLLM: per request, (latency - TTFT) / (tokens - 1)) is GuideLLM's per-request
  ``inter_token_latency_ms``: its statistics come from the report's per-request records when it
  holds them, else from ``metrics.inter_token_latency_ms`` (weighted by tokens, an approximation).
- ``itl`` (vLLM: every gap between tokens): the mean is exact (GuideLLM's token-weighted mean of
  per-request means is total decode time / gaps); its percentiles are those of the per-request
  means, so the spread within a request is lost and tails are understated.
- throughputs are recomputed as vLLM does (successful requests and their tokens / duration).

GuideLLM does not know the hardware: give ``--gpu`` and ``--gpu-count`` (or ``extras.gpu`` /
``extras.gpu_count`` in the report).
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fleetplan.catalog.models import normalize_model
from fleetplan.profiles.formats import (
    IngestOptions,
    RecordError,
    SourceRef,
    check_model,
    ingest_format,
    record_digest,
    resolve_gpu,
    server_fields,
)
from fleetplan.profiles.schema import LATENCY_METRICS
from fleetplan.profiles.vllm import (
    MAX_GPUS,
    MAX_NUMBER,
    Count,
    Gpus,
    MaybeText,
    Number,
    first_problem,
    short,
)

_METRIC_KEYS = {"ttft": ("time_to_first_token_ms", 1.0), "e2e": ("request_latency", 1e3),
                "itl": ("inter_token_latency_ms", 1.0), "tpot": ("inter_token_latency_ms", 1.0)}


def _fail(src: SourceRef, where: str, msg: str) -> RecordError:
    return RecordError(f"{src.path}: line {src.line}: {where}: {msg}")


def is_guidellm(obj: dict[str, Any]) -> bool:
    """A GuideLLM report: a ``benchmarks`` list of generative benchmarks with ``metrics``."""
    benches = obj.get("benchmarks")
    return (isinstance(benches, list) and bool(benches) and isinstance(benches[0], dict)
            and "metrics" in benches[0]
            and str(benches[0].get("type_", "generative_benchmark")).startswith("generative"))


def _get(d: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


class _Pct(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    p50: Number | None = None
    p90: Number | None = None
    p95: Number | None = None
    p99: Number | None = None


class _Dist(BaseModel):
    """A GuideLLM distribution (``metrics.<name>.successful``): the fields read, bounded."""

    model_config = ConfigDict(extra="allow", frozen=True)
    mean: Number | None = None
    std_dev: Number | None = None
    median: Number | None = None
    max: Number | None = None
    total_sum: Number | None = None
    percentiles: _Pct | None = None


class _Totals(BaseModel):
    """``metrics.request_totals``: whole, bounded request counts."""

    model_config = ConfigDict(extra="allow", frozen=True)
    successful: Count
    errored: Count = 0
    incomplete: Count = 0
    total: Count | None = None


class _Strategy(BaseModel):
    """``config.strategy`` (0.4+) or ``args.strategy`` (0.2/0.3)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type_: Annotated[str, Field(max_length=50)]
    rate: Number | None = None
    streams: Annotated[Count, Field(ge=1)] | None = None
    max_concurrency: Annotated[Count, Field(ge=1)] | None = None


class _Extras(BaseModel):
    """``extras`` (or ``args.extras``): the hardware and engine GuideLLM does not record."""

    model_config = ConfigDict(extra="allow", frozen=True)
    gpu: MaybeText = None
    gpu_count: Gpus | None = None
    engine: MaybeText = None
    engine_version: MaybeText = None


class _Request(BaseModel):
    """One per-request record of ``requests.successful``."""

    model_config = ConfigDict(extra="allow", frozen=True)
    inter_token_latency_ms: Number | None = None


M = TypeVar("M", bound=BaseModel)


def _checked(model: type[M], value: Any, src: SourceRef, where: str) -> M:
    """``value`` through ``model``; the first problem refuses the report, at its path."""
    if not isinstance(value, dict):
        raise _fail(src, where, f"expected an object, found {type(value).__name__}")
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        field, msg = first_problem(exc)
        if field is None:
            raise _fail(src, where, msg) from None
        raise _fail(src, f"{where}.{field.replace('[', '.').replace(']', '')}", msg) from None


def _num(v: Any, src: SourceRef, where: str) -> float:
    """A finite number 0..MAX_NUMBER (an int is compared before any float conversion, so a
    huge one is refused, never an OverflowError)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise _fail(src, where, f"{short(v)} is not a finite number >= 0")
    if isinstance(v, int):
        if not 0 <= v <= MAX_NUMBER:
            raise _fail(src, where, f"{short(v)} is not a number between 0 and {MAX_NUMBER:g}")
        return float(v)
    if not math.isfinite(v) or v < 0:
        raise _fail(src, where, f"{short(v)} is not a finite number >= 0")
    if v > MAX_NUMBER:
        raise _fail(src, where, f"{short(v)} is not a number between 0 and {MAX_NUMBER:g}")
    return v


def _count(v: Any, src: SourceRef, where: str) -> int:
    """A whole number of GPUs 1..MAX_GPUS (an int, or a string of ASCII digits: JSON written
    by hand; ``1_000`` and Unicode digits are refused)."""
    if isinstance(v, str) and re.fullmatch(r"[0-9]{1,6}", v.strip()):
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_GPUS:
        raise _fail(src, where, f"{short(v)} is not a whole number of GPUs (1 to {MAX_GPUS})")
    return v


def _mapping(v: Any, src: SourceRef, where: str) -> dict[str, Any]:
    """An optional JSON object (absent: empty); anything else is refused, naming the field."""
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise _fail(src, where, f"expected an object, found {type(v).__name__}")
    return v


def _dist(bench: dict[str, Any], name: str, src: SourceRef, where: str) -> dict[str, Any]:
    d = _get(bench, "metrics", name, "successful")
    if not isinstance(d, dict):
        raise _fail(src, f"{where}.metrics.{name}.successful", "missing")
    return d


def _total_sum(bench: dict[str, Any], name: str, src: SourceRef, where: str) -> float:
    dw = f"{where}.metrics.{name}.successful"
    total = _checked(_Dist, _dist(bench, name, src, where), src, dw).total_sum
    if total is None:
        raise _fail(src, f"{dw}.total_sum", "missing")
    return total


def _stats(d: dict[str, Any], scale: float, src: SourceRef, where: str) -> dict[str, float]:
    dist = _checked(_Dist, d, src, where)
    pct = dist.percentiles or _Pct()
    raw = {"mean": dist.mean, "std": dist.std_dev,
           "p50": pct.p50 if pct.p50 is not None else dist.median, "p90": pct.p90,
           "p95": pct.p95, "p99": pct.p99, "p100": dist.max}
    return {k: v * scale for k, v in raw.items() if v is not None}


def _sample_stats(values_ms: list[float]) -> dict[str, float]:
    a = np.asarray(values_ms, dtype=float)
    q = np.percentile(a, [50, 90, 95, 99, 100])
    return {"mean": float(a.mean()), "std": float(a.std()), "p50": float(q[0]),
            "p90": float(q[1]), "p95": float(q[2]), "p99": float(q[3]), "p100": float(q[4])}


def _protocol(bench: dict[str, Any], src: SourceRef, where: str) -> dict[str, Any]:
    strat = _get(bench, "config", "strategy") or _get(bench, "args", "strategy")
    if not isinstance(strat, dict) or "type_" not in strat:
        raise _fail(src, f"{where}.config.strategy", "missing (no scheduling strategy)")
    sw = f"{where}.config.strategy"
    st = _checked(_Strategy, strat, src, sw)
    kind, cap = st.type_, st.max_concurrency
    if kind == "poisson":
        if st.rate is None or st.rate <= 0:
            raise _fail(src, f"{sw}.rate", f"{short(st.rate)} must be > 0 req/s")
        return {"request_rate": st.rate, "burstiness": 1.0, "max_concurrency": cap}
    if kind == "synchronous":
        return {"request_rate": math.inf, "burstiness": 1.0, "max_concurrency": 1}
    if kind == "concurrent":
        if st.streams is None:
            raise _fail(src, f"{sw}.streams", "missing (the number of concurrent streams)")
        return {"request_rate": math.inf, "burstiness": 1.0, "max_concurrency": st.streams}
    if kind == "throughput":
        return {"request_rate": math.inf, "burstiness": 1.0, "max_concurrency": cap}
    if kind == "constant":
        raise _fail(src, f"{where}.config.strategy", "constant-rate arrivals (evenly spaced, a "
                    "gamma shape of infinity) cannot be stored: burstiness must be finite; "
                    "run GuideLLM with --rate-type poisson")
    raise _fail(src, f"{where}.config.strategy.type_", f"unknown strategy {short(kind)}")


def _duration(bench: dict[str, Any], src: SourceRef, where: str) -> float:
    if isinstance(bench.get("duration"), int | float):
        d = _num(bench["duration"], src, f"{where}.duration")
        if d <= 0:
            raise _fail(src, f"{where}.duration", f"{d!r} must be > 0 seconds")
        return d
    for start, end in ((("scheduler_metrics", "measure_start_time"),
                        ("scheduler_metrics", "measure_end_time")),
                       (("start_time",), ("end_time",))):
        a, b = _get(bench, *start), _get(bench, *end)
        if isinstance(a, int | float) and isinstance(b, int | float) and b > a:
            return float(b - a)
    raise _fail(src, f"{where}.duration", "missing (no duration nor start/end times)")


def _date(start: Any, src: SourceRef, where: str) -> str | None:
    """``YYYYMMDD-HHMMSS`` of a Unix start time (``None`` when absent); nonsense is refused."""
    if isinstance(start, bool) or not isinstance(start, int | float) or not start > 0:
        return None
    try:
        return datetime.fromtimestamp(float(start), UTC).strftime("%Y%m%d-%H%M%S")
    except (OverflowError, OSError, ValueError):
        raise _fail(src, where, f"{start!r} is not a Unix time") from None


def _parse_one(report: dict[str, Any], bench: dict[str, Any], k: int, src: SourceRef,
               opt: IngestOptions) -> dict[str, Any]:
    where = f"benchmarks[{k}]"
    if not isinstance(bench, dict):
        raise _fail(src, where, f"expected an object, found {type(bench).__name__}")
    model_id = (_get(report, "args", "model") or _get(bench, "config", "backend", "model")
                or _get(bench, "worker", "backend_model"))
    if not isinstance(model_id, str) or not model_id:
        raise _fail(src, where, "no model name (args.model)")
    in_args = "extras" not in report and _get(report, "args", "extras") is not None
    ex_where = "args.extras" if in_args else "extras"
    raw_extras = report.get("extras") or _get(report, "args", "extras")
    extras = _checked(_Extras, _mapping(raw_extras, src, ex_where), src, ex_where)
    gpu_raw = opt.gpu or extras.gpu
    gpu_count = opt.gpu_count or extras.gpu_count
    if not gpu_raw or gpu_count is None:
        raise _fail(src, where, "a GuideLLM report does not name the hardware: give --gpu and "
                    "--gpu-count")
    gpu = resolve_gpu(src, "--gpu" if opt.gpu else f"{ex_where}.gpu", gpu_raw, opt)
    gpu_count = _count(gpu_count, src, "--gpu-count" if opt.gpu_count else f"{ex_where}.gpu_count")
    tw = f"{where}.metrics.request_totals"
    raw_totals = _get(bench, "metrics", "request_totals") or bench.get("request_totals")
    totals = _checked(_Totals, _mapping(raw_totals, src, tw), src, tw)
    ok, err = totals.successful, totals.errored
    total = totals.total if totals.total is not None else ok + err
    if total < ok + err:
        raise _fail(src, f"{tw}.total", f"{total} is fewer than successful + errored = "
                    f"{ok + err}")
    model = check_model(src, normalize_model(model_id), opt)
    engine = extras.engine or "unknown"
    duration = _duration(bench, src, where)
    n_in, n_out = (_total_sum(bench, name, src, where)
                   for name in ("prompt_token_count", "output_token_count"))
    start = _get(bench, "scheduler_metrics", "start_time") or _get(bench, "start_time")
    rec: dict[str, Any] = {
        "run_id": record_digest([src.digest, k]),
        "model": model, "model_id": model_id,
        "gpu": gpu, "gpu_count": gpu_count, "tp_size": opt.described().tp or gpu_count,
        "config": f"{gpu_count}x{gpu}",
        "engine": engine,
        "engine_version": opt.engine_version or extras.engine_version,
        "date": _date(start, src, f"{where}.start_time"),
        "source_format": "guidellm", "source_file": src.path.name, "source_line": src.line,
        "num_prompts": max(total, 1), "dataset": opt.dataset,
        **_protocol(bench, src, where),
        "duration_s": duration, "completed": ok, "failed": err,
        "total_input_tokens": round(n_in), "total_output_tokens": round(n_out),
        "request_throughput": ok / duration, "output_throughput": n_out / duration,
        "total_token_throughput": (n_in + n_out) / duration,
        **server_fields(src, opt),
    }
    per_request = _get(bench, "requests", "successful")
    if not isinstance(per_request, list):
        per_request = []  # no per-request records: the summary statistics are used
    samples = []
    for i, r in enumerate(per_request):
        itl = _checked(_Request, r, src, f"{where}.requests.successful[{i}]")
        if itl.inter_token_latency_ms is not None:
            samples.append(itl.inter_token_latency_ms)
    for metric in LATENCY_METRICS:
        name, scale = _METRIC_KEYS[metric]
        if metric == "tpot" and samples:
            stats = _sample_stats(samples)
        else:
            stats = _stats(_dist(bench, name, src, where), scale, src,
                           f"{where}.metrics.{name}.successful")
        for stat, value in stats.items():
            rec[f"{metric}_{stat}_ms"] = value
    return rec


@ingest_format("guidellm", detect=is_guidellm)
def parse_report(obj: dict[str, Any], src: SourceRef, opt: IngestOptions) -> list[dict[str, Any]]:
    """One store record per benchmark of a GuideLLM report (refusing the whole report if one
    benchmark cannot be read: the error names it)."""
    return [_parse_one(obj, b, k, src, opt) for k, b in enumerate(obj["benchmarks"])]
