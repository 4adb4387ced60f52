"""A benchmark run's result: ``vllm bench serve``'s result JSON plus fleetplan's fields.

Main entries: :func:`result_dict` (outcomes + run facts -> the JSON object), :func:`summary_rows`
(the figures the CLI shows as a table) and :func:`write_results` (one object, or one per line for
a sweep; atomic).

Shape: the summary keys of vLLM 0.32 (``duration``, ``completed``, ``failed``,
``total_input_tokens`` ... ``mean_ttft_ms``, ``median_ttft_ms``, ``std_ttft_ms``, ``p99_ttft_ms``
and the same for ``tpot``, ``itl``, ``e2el``) and its per-request arrays (``input_lens``,
``output_lens``, ``ttfts``, ``itls``, ``latencies``, ``start_times``, ``queue_times``, ``errors``;
seconds; one entry per request sent, failed ones with an error and zero output), then
fleetplan's: ``gpu``, ``gpu_count``, power (``gpu_energy_j``, ``gpu_avg_power_w``,
``gpu_energy_per_output_token_j``, ``power_status`` ...), ``partial`` and ``partial_reason``, and
the protocol facts (``seed``, ``arrival_schedule``) and how late the client sent against its
schedule (``send_lag_p50_ms``, ``send_lag_p99_ms``, ``send_lag_max_ms``). A statistic over no
sample is ``null``, never 0. ``start_times`` count from the run's start.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from fleetplan._io import atomic_write_text, json_safe
from fleetplan.bench.stream import RequestOutcome

PERCENTILES = (50, 90, 95, 99)
_METRICS = ("ttft", "tpot", "itl", "e2el")


def _stats(name: str, samples_s: Sequence[float]) -> dict[str, float | None]:
    arr = np.asarray(samples_s, dtype=float) * 1e3
    keys = [f"mean_{name}_ms", f"median_{name}_ms", f"std_{name}_ms",
            *(f"p{p}_{name}_ms" for p in PERCENTILES)]
    if arr.size == 0:
        return dict.fromkeys(keys, None)
    vals = [arr.mean(), np.median(arr), arr.std(), *np.percentile(arr, PERCENTILES)]
    return {k: float(v) for k, v in zip(keys, vals, strict=True)}


def _peaks(ok: list[RequestOutcome], t0: float) -> tuple[float, int]:
    """vLLM's peak output tokens/s and peak concurrent requests, in one-second buckets."""
    if not ok:
        return 0.0, 0
    start = min(o.start_s for o in ok) - t0
    end = max(o.start_s + o.latency_s for o in ok) - t0
    n = int(math.ceil(end - start)) + 1
    tokens = np.zeros(n)
    conc = np.zeros(n)
    for o in ok:
        t = o.start_s - t0 + o.ttft_s + np.concatenate([[0.0], np.cumsum(o.itl_s)])
        b = (t - start).astype(int)
        np.add.at(tokens, b[(b >= 0) & (b < n)], 1)
        a = int(o.start_s - t0 - start)
        z = int(o.start_s - t0 + o.latency_s - start)
        conc[a: min(z, n - 1) + 1] += 1
    return float(tokens.max()), int(conc.max())


def result_dict(outcomes: Sequence[RequestOutcome], *, t0: float, duration_s: float,
                header: dict[str, Any], extra: dict[str, Any],
                queue_times: Sequence[float] | None = None,
                fallback_prompt_tokens: Sequence[int] | None = None) -> dict[str, Any]:
    """The result JSON object.

    ``header`` holds the run's setup (vLLM's leading keys: ``date``, ``backend``, ``model_id``,
    ``num_prompts``, ``request_rate`` ...), ``extra`` fleetplan's trailing fields. Outcomes are in
    request order; ``fallback_prompt_tokens[i]`` is used when the server sent no usage for
    request ``i`` (and ``input_tokens_source`` says so).
    """
    ok = [o for o in outcomes if o.success]
    input_lens = []
    from_usage = 0
    for i, o in enumerate(outcomes):
        if o.prompt_tokens is not None:
            input_lens.append(o.prompt_tokens)
            from_usage += 1
        else:
            input_lens.append(int(fallback_prompt_tokens[i]) if fallback_prompt_tokens else 0)
    output_lens = [o.output_tokens if o.success else 0 for o in outcomes]
    total_in = sum(n for n, o in zip(input_lens, outcomes, strict=True) if o.success)
    total_out = sum(output_lens)
    dur = duration_s if duration_s > 0 else float("nan")
    tpots = [t for o in ok if (t := o.tpot_s) is not None]
    max_tok_s, max_conc = _peaks(ok, t0)
    out: dict[str, Any] = dict(header)
    out.update({
        "duration": duration_s,
        "completed": len(ok),
        "failed": len(outcomes) - len(ok),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / dur,
        "request_goodput": None,
        "output_throughput": total_out / dur,
        "total_token_throughput": (total_in + total_out) / dur,
        "input_lens": input_lens,
        "output_lens": output_lens,
        "ttfts": [o.ttft_s if o.success else 0.0 for o in outcomes],
        "itls": [list(o.itl_s) for o in outcomes],
        "latencies": [o.latency_s if o.success else 0.0 for o in outcomes],
        "start_times": [o.start_s - t0 for o in outcomes],
        "queue_times": list(queue_times) if queue_times is not None else [0.0] * len(outcomes),
        "errors": [o.error for o in outcomes],
        "max_output_tokens_per_s": max_tok_s,
        "max_concurrent_requests": max_conc,
    })
    samples = {"ttft": [o.ttft_s for o in ok], "tpot": tpots,
               "itl": [x for o in ok for x in o.itl_s], "e2el": [o.latency_s for o in ok]}
    for m in _METRICS:
        out.update(_stats(m, samples[m]))
    n_ok_usage = sum(1 for o in ok if o.tokens_from_usage)
    out["output_tokens_source"] = ("server usage" if n_ok_usage == len(ok) else
                                   "token events (server sent no usage)" if n_ok_usage == 0
                                   else f"server usage for {n_ok_usage} of {len(ok)} requests, "
                                        "token events for the rest")
    out["input_tokens_source"] = ("server usage" if from_usage == len(outcomes) else
                                  f"server usage for {from_usage} of {len(outcomes)} requests; "
                                  "the rest: the request's word count (assumption)")
    out.update(extra)
    energy = out.get("gpu_energy_j")
    out["gpu_energy_per_output_token_j"] = (energy / total_out if energy is not None
                                            and total_out > 0 else None)
    return out


def summary_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) pairs for the end-of-run table; missing figures show as 'unknown'."""

    def f(key: str, digits: int = 2) -> str:
        v = result.get(key)
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return "unknown"
        return f"{v:.{digits}f}" if isinstance(v, float) else str(v)

    rows = [
        ("Request rate (req/s, target)", str(result.get("request_rate"))),
        ("Requests completed / failed", f"{result.get('completed')} / {result.get('failed')}"),
        ("Duration (s)", f("duration")),
        ("Request throughput (req/s)", f("request_throughput", 3)),
        ("Output throughput (tok/s)", f("output_throughput", 1)),
        ("Total token throughput (tok/s)", f("total_token_throughput", 1)),
    ]
    for m, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2E")):
        rows.append((f"{label} mean / p50 / p99 (ms)",
                     f"{f(f'mean_{m}_ms', 1)} / {f(f'median_{m}_ms', 1)} / {f(f'p99_{m}_ms', 1)}"))
    rows += [
        ("GPU energy (J)", f("gpu_energy_j", 1)),
        ("GPU average power (W)", f("gpu_avg_power_w", 1)),
        ("GPU energy per output token (J)", f("gpu_energy_per_output_token_j", 4)),
        ("Power source", str(result.get("power_source"))),
        ("Send lag p50 / p99 / max (ms)", f"{f('send_lag_p50_ms', 1)} / "
                                          f"{f('send_lag_p99_ms', 1)} / {f('send_lag_max_ms', 1)}"),
    ]
    if result.get("partial"):
        rows.append(("PARTIAL RESULT", str(result.get("partial_reason"))))
    return rows


def _encode(result: dict[str, Any]) -> str:
    return json.dumps(json_safe(result), allow_nan=False)


def write_results(path: str | os.PathLike[str], results: Sequence[dict[str, Any]]) -> None:
    """Write one result as a JSON object, several as JSON lines (vLLM's ``--append-result``)."""
    if len(results) == 1:
        atomic_write_text(path, _encode(results[0]) + "\n")
    else:
        atomic_write_text(path, "".join(_encode(r) + "\n" for r in results))
