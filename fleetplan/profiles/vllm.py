"""vLLM serving-benchmark result files (ingest format ``vllm``): one typed, bounded schema.

Every field fleetplan reads from a result file goes through :class:`VllmResult` (pydantic) once,
at the boundary; what it refuses becomes one line naming the file, line, field and value. Shapes
read (synthetic examples of each under ``tests/data/vllm-formats/``):

- vLLM 0.6.x ``benchmarks/benchmark_serving.py --save-result``: summary keys
  (``mean_ttft_ms``, ``median_ttft_ms``, ``std_ttft_ms``, ``p99_ttft_ms`` ...), no ``failed``,
  per-request arrays ``input_lens``/``output_lens``/``ttfts``/``itls``/``errors`` always present;
  ``burstiness`` and ``max_concurrency`` only from 0.6.4 on (absent: Poisson, no cap).
- vLLM 0.8.x: the same plus ``burstiness``, ``max_concurrency``, the misspelt
  ``request_goodput:`` key, ``request_rate: "inf"`` for all-at-once, ``--metadata KEY=VALUE``
  pairs as strings (``gpu_count: "1"``, ``tensor_parallel_size: "2"``), and the per-request
  arrays only with ``--save-detailed`` (0.8.3+).
- current ``vllm bench serve``: adds ``failed``, ``endpoint_type``, ``max_concurrent_requests``
  and the arrays ``latencies``/``start_times``.
- fleetplan's own ``bench`` output (that shape plus ``gpu``/``gpu_count``/``partial``).

Numbers must be finite and within bounds; counts whole (an int, an integral float such as
``200.0``, or a string of ASCII digits as ``--metadata`` writes them: ``1.7``, ``1_000``, Unicode
digits, lists are refused). Cross-field checks: ``completed + failed <= num_prompts``; the
per-request arrays have one entry per request. Pipeline-parallel, data-parallel and multi-node
runs are refused (the replica model is tensor-parallel on one node): never read as TP.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

import numpy as np
from pydantic import BeforeValidator, ConfigDict, Field, ValidationError, create_model

MAX_COUNT = 10**12  # requests, tokens: more is corruption, not a benchmark
MAX_NUMBER = 1e12  # ms, s, req/s, tok/s, J, W: far above any real run
MAX_GPUS = 1024  # GPUs of one server: more is a typo, not a configuration
_DIGITS = re.compile(r"[0-9]{1,13}")
_DECIMAL = re.compile(r"[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]{1,3})?")


def _count(v: Any) -> int:
    """A whole number >= 0: an int, an integral float or a string of ASCII digits."""
    if isinstance(v, bool):
        raise ValueError(f"{short(v)} is not a whole number")
    if isinstance(v, str):
        text = v.strip()
        if not _DIGITS.fullmatch(text):
            raise ValueError(f"{short(v)} is not a whole number")
        v = int(text)
    if isinstance(v, float):
        if not math.isfinite(v) or not v.is_integer():
            raise ValueError(f"{short(v)} is not a whole number")
        if abs(v) > MAX_COUNT:
            raise ValueError(f"{short(v)} must be between 0 and {MAX_COUNT:g}")
        v = int(v)
    if not isinstance(v, int):
        raise ValueError(f"{short(v)} is not a whole number")
    if v < 0:
        raise ValueError(f"{short(v)} must be >= 0")
    if v > MAX_COUNT:  # compared as ints: no float overflow on huge values
        raise ValueError(f"{short(v)} must be <= {MAX_COUNT:g}")
    return v


def _gpus(v: Any) -> int:
    """A number of GPUs (or a parallel degree): a whole number 1..MAX_GPUS."""
    n = v if isinstance(v, int) and not isinstance(v, bool) else _count(v)
    if not 1 <= n <= MAX_GPUS:
        raise ValueError(f"{short(v)} must be between 1 and {MAX_GPUS}")
    return n


def _blank(v: Any) -> bool:
    """An empty or all-blank string: a field the writer left unfilled (not recorded)."""
    return isinstance(v, str) and not v.strip()


def _number(v: Any) -> float:
    """A finite number 0..MAX_NUMBER: an int, a float or a plain decimal string."""
    if isinstance(v, bool):
        raise ValueError(f"{short(v)} is not a finite number")
    if isinstance(v, str):
        if not _DECIMAL.fullmatch(v.strip()):
            raise ValueError(f"{short(v)} is not a finite number")
        v = float(v)
    if isinstance(v, int):
        if v < 0:
            raise ValueError(f"{short(v)} must be >= 0")
        if v > MAX_NUMBER:  # compared as ints: float() of a huge int would overflow
            raise ValueError(f"{short(v)} must be <= {MAX_NUMBER:g}")
        return float(v)
    if not isinstance(v, float):
        raise ValueError(f"{short(v)} is not a finite number")
    if not math.isfinite(v):
        raise ValueError(f"{short(v)} is not a finite number")
    if v < 0:
        raise ValueError(f"{short(v)} must be >= 0")
    if v > MAX_NUMBER:
        raise ValueError(f"{short(v)} must be <= {MAX_NUMBER:g}")
    return v


def _rate(v: Any) -> float:
    """A request rate > 0, or ``inf`` (all at once; vLLM 0.8 writes the string ``"inf"``)."""
    if isinstance(v, str) and v.strip().lower() in ("inf", "infinity", "+inf"):
        return math.inf
    if isinstance(v, float) and v == math.inf:
        return v
    f = _number(v)
    if f <= 0:
        raise ValueError(f"{short(v)} must be > 0 (or inf)")
    return f


def _flag(v: Any) -> bool:
    """A JSON boolean; ``"false"`` (a string) is refused rather than read as True."""
    if not isinstance(v, bool):
        raise ValueError(f"{short(v)} is not a boolean (write true or false)")
    return v


def _text(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, str | int | float):
        raise ValueError(f"{short(v)} is not a string")
    return str(v)


def short(v: Any, most: int = 60) -> str:
    """``repr(v)`` cut to ``most`` characters, never rendering more of a huge value than that:
    ints by digit count, containers of more than 8 items (or nested ones) by their size."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**most:
        digits = len(str(abs(v))) if abs(v) < 10**4000 else "over 4000"
        return f"<an integer of {digits} digits>"
    if isinstance(v, dict | list | tuple):
        items = list(v.values()) if isinstance(v, dict) else list(v[:9])
        flat = all(isinstance(x, int | float | bool | None) or (isinstance(x, str) and len(x) < 20)
                   for x in items)
        if len(v) > 8 or not flat:
            kind = "an object of" if isinstance(v, dict) else "a list of"
            return f"<{kind} {len(v)} {'keys' if isinstance(v, dict) else 'items'}>"
    if isinstance(v, str) and len(v) > most:
        return repr(v[:most]) + "..."
    text = repr(v)
    return text if len(text) <= most else text[:most] + "..."


Count = Annotated[int, BeforeValidator(_count)]
Gpus = Annotated[int, BeforeValidator(_gpus)]
Number = Annotated[float, BeforeValidator(_number)]
Rate = Annotated[float, BeforeValidator(_rate)]
Flag = Annotated[bool, BeforeValidator(_flag)]
Text = Annotated[str, BeforeValidator(_text), Field(max_length=500)]
MaybeText = Annotated[Annotated[str, Field(max_length=500)] | None,
                      BeforeValidator(lambda v: None if v is None or _blank(v) else _text(v))]
# a GPU count or parallel degree that may be absent: a blank string is "not recorded" (a
# script that fills the field from an unset variable writes ""), so --gpu-count can give it
MaybeGpus = Annotated[int | None, BeforeValidator(lambda v: None if v is None or _blank(v)
                                                  else _gpus(v))]

# vLLM's metric names -> the store's (``e2el`` is end-to-end latency)
VLLM_METRICS = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2el"}
STAT_KEYS = {"mean": "mean_{m}_ms", "std": "std_{m}_ms", "p50": "median_{m}_ms",
             "p90": "p90_{m}_ms", "p95": "p95_{m}_ms", "p99": "p99_{m}_ms",
             "p100": "p100_{m}_ms"}
_SUMMARY_KEYS = [pattern.format(m=m) for m in VLLM_METRICS.values()
                 for pattern in (*STAT_KEYS.values(), "p50_{m}_ms")]

_Summary: Any = create_model(  # the summary statistics, each an optional bounded number
    "_Summary", __config__=ConfigDict(extra="allow", frozen=True, protected_namespaces=()),
    **{k: (Number | None, None) for k in _SUMMARY_KEYS},  # type: ignore[call-overload]
)


class VllmResult(_Summary):  # type: ignore[misc,valid-type]
    """The fields fleetplan reads from one vLLM result record, typed and bounded. Other keys
    (``generated_texts``, extra percentiles ...) are kept but never read."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True,
                              protected_namespaces=())

    date: MaybeText = None
    backend: MaybeText = None
    endpoint_type: MaybeText = None
    engine: MaybeText = None
    engine_version: MaybeText = None
    vllm_version: MaybeText = None
    model_id: MaybeText = None
    model: MaybeText = None
    tokenizer_id: MaybeText = None
    dataset_name: MaybeText = None
    gpu: MaybeText = None
    gpu_name: MaybeText = None
    gpu_count: MaybeGpus = None
    tensor_parallel_size: MaybeGpus = None
    tp_size: MaybeGpus = None
    pipeline_parallel_size: MaybeGpus = None
    pp_size: MaybeGpus = None
    data_parallel_size: MaybeGpus = None
    num_nodes: MaybeGpus = None
    nnodes: MaybeGpus = None
    num_prompts: Count = Field(ge=1)
    request_rate: Rate
    burstiness: Number | None = Field(default=None, gt=0)
    max_concurrency: Count | None = None
    duration: Number
    completed: Count
    failed: Count | None = None
    total_input_tokens: Count
    total_output_tokens: Count
    request_throughput: Number
    request_goodput: Number | None = None
    request_goodput_colon: Number | None = Field(default=None, alias="request_goodput:")
    output_throughput: Number
    total_token_throughput: Number
    gpu_energy_j: Number | None = None
    gpu_avg_power_w: Number | None = None
    partial: Flag = False
    input_lens: list[Count] | None = Field(default=None, max_length=10**7)
    output_lens: list[Count] | None = Field(default=None, max_length=10**7)
    ttfts: list[Number] | None = Field(default=None, max_length=10**7)
    itls: list[list[Number]] | None = Field(default=None, max_length=10**7)
    latencies: list[Number] | None = Field(default=None, max_length=10**7)
    errors: list[str | None] | None = Field(default=None, max_length=10**7)

    def stat(self, key: str) -> float | None:
        v = getattr(self, key, None)
        return v if isinstance(v, float) else None


_ARRAYS = ("ttfts", "itls", "errors", "output_lens", "input_lens", "latencies")


def first_problem(exc: ValidationError) -> tuple[str | None, str]:
    """(field, message) of a validation error's first problem, the value shown once and bounded:
    ``itls[3][1]``; a missing field is (None, "missing required field 'x'")."""
    err = exc.errors(include_url=False)[0]
    loc = err["loc"]
    where = (str(loc[0]) + "".join(f"[{x}]" for x in loc[1:])) if loc else "?"
    if err["type"] == "missing":
        return None, f"missing required field {where!r}"
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] in ("model_type", "dict_type", "model_attributes_type"):
        return where, f"expected an object, found {type(err.get('input')).__name__}"
    if not loc:  # a cross-field check of the whole record: its message says it all
        return None, msg
    shown = short(err.get("input"))
    if not (msg.startswith(shown) or msg.startswith(repr(err.get("input"))[:20])):
        msg = f"{shown}: {msg}"
    return where, msg


def check_result(obj: dict[str, Any]) -> tuple[VllmResult | None,
                                                tuple[str | None, str] | None]:
    """The typed record, or (field, message) of the first thing refused: a field's value, or a
    cross-field check (counts, array lengths)."""
    try:
        res = VllmResult.model_validate(obj)
    except ValidationError as exc:
        return None, first_problem(exc)
    done = res.completed + (res.failed or 0)
    if done > res.num_prompts:
        what = "completed + failed" if res.failed else "completed"
        return None, ("completed", f"{what} = {done} exceeds num_prompts = {res.num_prompts}")
    lengths = {k: len(getattr(res, k)) for k in _ARRAYS if getattr(res, k) is not None}
    if len(set(lengths.values())) > 1:
        first = next(iter(lengths))
        odd = next(k for k, n in lengths.items() if n != lengths[first])
        return None, (odd, f"holds {lengths[odd]} entries but {first} holds {lengths[first]} "
                      "(one per request)")
    if lengths and next(iter(lengths.values())) > res.num_prompts:
        k = next(iter(lengths))
        return None, (k, f"holds {lengths[k]} entries, more than num_prompts = "
                      f"{res.num_prompts}")
    return res, None


def stats_from_samples(samples_ms: np.ndarray) -> dict[str, float]:
    """mean, std and percentiles of latency samples (ms); empty when there are none."""
    if samples_ms.size == 0:
        return {}
    q = np.percentile(samples_ms, [50, 90, 95, 99, 100])
    return {"mean": float(samples_ms.mean()), "std": float(samples_ms.std()),
            "p50": float(q[0]), "p90": float(q[1]), "p95": float(q[2]), "p99": float(q[3]),
            "p100": float(q[4])}


def per_request_samples(res: VllmResult) -> dict[str, np.ndarray]:
    """Latency samples (ms) of the successful requests, from the per-request arrays (seconds);
    empty without them. A request counts as failed when its ``errors`` entry is non-empty."""
    if res.ttfts is None:
        return {}
    n = len(res.ttfts)
    errors = res.errors if res.errors is not None else [""] * n
    ok = [not e for e in errors]
    ttfts = np.asarray(res.ttfts, dtype=float)
    out: dict[str, np.ndarray] = {"ttft": ttfts[np.asarray(ok, dtype=bool)] * 1e3}
    if res.itls is not None:
        itls = [np.asarray(x, dtype=float) for x in res.itls]
        out["itl"] = np.asarray([x for i, a in enumerate(itls) if ok[i] for x in a]) * 1e3
        if res.latencies is not None:
            out["e2e"] = np.asarray([res.latencies[i] for i in range(n) if ok[i]]) * 1e3
        else:
            out["e2e"] = np.asarray([ttfts[i] + a.sum() for i, a in enumerate(itls)
                                     if ok[i]]) * 1e3
        if res.output_lens is not None:
            outs = res.output_lens
            out["tpot"] = np.asarray([a.sum() / (outs[i] - 1) for i, a in enumerate(itls)
                                      if ok[i] and outs[i] > 1]) * 1e3
    return out
