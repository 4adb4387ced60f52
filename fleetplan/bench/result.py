"""A benchmark run's result: ``vllm bench serve``'s result JSON plus fleetplan's fields.

Main entries: :func:`bench_result` (outcomes + :class:`RunHeader` + :class:`RunFacts` ->
:class:`BenchResult`, whose ``to_dict()`` is the JSON object), :func:`summary_rows` (the figures
the CLI shows as a table) and :func:`write_results` (one object, or one per line for a sweep;
atomic).

Shape: the summary keys of vLLM 0.32 (``duration``, ``completed``, ``failed``,
``total_input_tokens`` ... ``mean_ttft_ms``, ``median_ttft_ms``, ``std_ttft_ms``, ``p99_ttft_ms``
and the same for ``tpot``, ``itl``, ``e2el``) and its per-request arrays (``input_lens``,
``output_lens``, ``ttfts``, ``itls``, ``latencies``, ``start_times``, ``queue_times``, ``errors``;
seconds; one entry per request sent, failed ones with an error and zero output), then
fleetplan's: ``gpu``, ``gpu_count``, power (``gpu_energy_j``, ``gpu_avg_power_w``,
``gpu_energy_per_output_token_j``, ``power_status`` ...), ``partial`` and ``partial_reason``, and
the protocol facts (``seed``, ``arrival_schedule``) and how late the client sent against its
schedule (``send_lag_p50_ms``, ``send_lag_p99_ms``, ``send_lag_max_ms``), and the client host's
CPUs over the run (``host_cpus``, ``host_cpu_limit``, ``host_cpu_throttled_ms``,
``client_cpu_s``, ``client_cpu_share``, ``host_load_avg_1m``: :mod:`fleetplan.bench.host`; None
where the host does not say). A statistic over no
sample is ``null``, never 0. ``start_times`` count from the run's start.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fleetplan._io import atomic_write_text, json_safe
from fleetplan.bench.host import HostFacts
from fleetplan.bench.power import PowerReport
from fleetplan.bench.stream import RequestOutcome

PERCENTILES = (50, 90, 95, 99)
_METRICS = ("ttft", "tpot", "itl", "e2el")


@dataclass(frozen=True)
class RunHeader:
    """The run's setup: vLLM's leading keys."""

    date: str
    endpoint_type: str
    backend: str
    label: str | None
    model_id: str
    tokenizer_id: str | None
    num_prompts: int
    request_rate: float
    burstiness: float
    max_concurrency: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"date": self.date, "endpoint_type": self.endpoint_type, "backend": self.backend,
                "label": self.label, "model_id": self.model_id,
                "tokenizer_id": self.tokenizer_id, "num_prompts": self.num_prompts,
                "request_rate": self.request_rate, "burstiness": self.burstiness,
                "max_concurrency": self.max_concurrency}


@dataclass(frozen=True)
class LatencyStats:
    """One latency's statistics in ms (vLLM's ``mean_<name>_ms`` ... ``p99_<name>_ms``); None
    over no sample."""

    mean_ms: float | None = None
    median_ms: float | None = None
    std_ms: float | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None

    @classmethod
    def of(cls, samples_s: Sequence[float]) -> LatencyStats:
        arr = np.asarray(samples_s, dtype=float) * 1e3
        if arr.size == 0:
            return cls()
        p50, p90, p95, p99 = (float(v) for v in np.percentile(arr, PERCENTILES))
        return cls(float(arr.mean()), float(np.median(arr)), float(arr.std()), p50, p90, p95,
                   p99)

    def fields(self, name: str) -> dict[str, float | None]:
        return {f"mean_{name}_ms": self.mean_ms, f"median_{name}_ms": self.median_ms,
                f"std_{name}_ms": self.std_ms, f"p50_{name}_ms": self.p50_ms,
                f"p90_{name}_ms": self.p90_ms, f"p95_{name}_ms": self.p95_ms,
                f"p99_{name}_ms": self.p99_ms}


@dataclass(frozen=True)
class SendLag:
    """How late the client sent against its schedule, ms (None without a request sent)."""

    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None

    def fields(self) -> dict[str, float | None]:
        return {"send_lag_p50_ms": self.p50_ms, "send_lag_p99_ms": self.p99_ms,
                "send_lag_max_ms": self.max_ms}


@dataclass(frozen=True)
class RunFacts:
    """fleetplan's trailing fields: engine, GPUs and power, partial, protocol, send lag, the
    client host's CPUs (:mod:`fleetplan.bench.host`)."""

    engine: str
    engine_version: str | None
    dataset_name: str | None
    gpu: str | None
    gpu_count: int | None
    power: PowerReport
    partial: bool
    partial_reason: str | None
    num_sent: int
    seed: int
    arrival_schedule: str
    ignore_eos: bool
    request_timeout_s: float
    endpoint: str
    client: str
    send_lag: SendLag
    host: HostFacts = HostFacts()
    # what the user stated about the server (--tp, --engine-arg): written only when stated,
    # as the keys ingest reads (``tensor_parallel_size``; each engine setting at the top
    # level, as ``vllm bench serve --metadata KEY=VALUE`` writes it)
    tensor_parallel_size: int | None = None
    # --pp, --dp, --nodes: as vLLM's own keys (what ingest and validate read), where stated
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    num_nodes: int | None = None
    engine_args: Mapping[str, int | float | bool | str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        layout = {k: v for k, v in (("tensor_parallel_size", self.tensor_parallel_size),
                                    ("pipeline_parallel_size", self.pipeline_parallel_size),
                                    ("data_parallel_size", self.data_parallel_size),
                                    ("num_nodes", self.num_nodes)) if v is not None}
        stated: dict[str, Any] = {**layout, **self.engine_args}
        return {"engine": self.engine, "engine_version": self.engine_version,
                "dataset_name": self.dataset_name, "gpu": self.gpu, "gpu_count": self.gpu_count,
                **stated,
                **self.power.fields(), "partial": self.partial,
                "partial_reason": self.partial_reason, "num_sent": self.num_sent,
                "seed": self.seed, "arrival_schedule": self.arrival_schedule,
                "ignore_eos": self.ignore_eos, "request_timeout_s": self.request_timeout_s,
                "endpoint": self.endpoint, "client": self.client, **self.send_lag.fields(),
                **self.host.fields()}


@dataclass(frozen=True)
class BenchResult:
    """One benchmark run (one rate); :meth:`to_dict` is the result file's JSON object."""

    header: RunHeader
    duration: float
    completed: int
    failed: int
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float
    output_throughput: float
    total_token_throughput: float
    input_lens: tuple[int, ...]
    output_lens: tuple[int, ...]
    ttfts: tuple[float, ...]
    itls: tuple[tuple[float, ...], ...]
    latencies: tuple[float, ...]
    start_times: tuple[float, ...]
    queue_times: tuple[float, ...]
    errors: tuple[str, ...]
    max_output_tokens_per_s: float
    max_concurrent_requests: int
    ttft: LatencyStats
    tpot: LatencyStats
    itl: LatencyStats
    e2el: LatencyStats
    output_tokens_source: str
    input_tokens_source: str
    facts: RunFacts
    request_goodput: float | None = None

    @property
    def request_rate(self) -> float:
        return self.header.request_rate

    @property
    def partial(self) -> bool:
        return self.facts.partial

    @property
    def gpu_energy_per_output_token_j(self) -> float | None:
        energy = self.facts.power.gpu_energy_j
        return (energy / self.total_output_tokens if energy is not None
                and self.total_output_tokens > 0 else None)

    def __getitem__(self, key: str) -> Any:
        """A field of the result file's JSON object (``result["duration"]``), as ``run`` and
        ``run_benchmark`` returned that object before they returned this record."""
        return self.to_dict()[key]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = self.header.to_dict()
        out.update({
            "duration": self.duration,
            "completed": self.completed,
            "failed": self.failed,
            "total_input_tokens": self.total_input_tokens,
            "total_output_tokens": self.total_output_tokens,
            "request_throughput": self.request_throughput,
            "request_goodput": self.request_goodput,
            "output_throughput": self.output_throughput,
            "total_token_throughput": self.total_token_throughput,
            "input_lens": list(self.input_lens),
            "output_lens": list(self.output_lens),
            "ttfts": list(self.ttfts),
            "itls": [list(x) for x in self.itls],
            "latencies": list(self.latencies),
            "start_times": list(self.start_times),
            "queue_times": list(self.queue_times),
            "errors": list(self.errors),
            "max_output_tokens_per_s": self.max_output_tokens_per_s,
            "max_concurrent_requests": self.max_concurrent_requests,
        })
        for name in _METRICS:
            out.update(getattr(self, name).fields(name))
        out["output_tokens_source"] = self.output_tokens_source
        out["input_tokens_source"] = self.input_tokens_source
        out.update(self.facts.to_dict())
        out["gpu_energy_per_output_token_j"] = self.gpu_energy_per_output_token_j
        return out


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


def bench_result(outcomes: Sequence[RequestOutcome], *, t0: float, duration_s: float,
                 header: RunHeader, facts: RunFacts,
                 queue_times: Sequence[float] | None = None,
                 fallback_prompt_tokens: Sequence[int] | None = None) -> BenchResult:
    """The result of one run.

    Outcomes are in request order; ``fallback_prompt_tokens[i]`` is used when the server sent no
    usage for request ``i`` (and ``input_tokens_source`` says so).
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
    n_ok_usage = sum(1 for o in ok if o.tokens_from_usage)
    return BenchResult(
        header=header,
        duration=duration_s,
        completed=len(ok),
        failed=len(outcomes) - len(ok),
        total_input_tokens=total_in,
        total_output_tokens=total_out,
        request_throughput=len(ok) / dur,
        output_throughput=total_out / dur,
        total_token_throughput=(total_in + total_out) / dur,
        input_lens=tuple(input_lens),
        output_lens=tuple(output_lens),
        ttfts=tuple(o.ttft_s if o.success else 0.0 for o in outcomes),
        itls=tuple(tuple(o.itl_s) for o in outcomes),
        latencies=tuple(o.latency_s if o.success else 0.0 for o in outcomes),
        start_times=tuple(o.start_s - t0 for o in outcomes),
        queue_times=(tuple(queue_times) if queue_times is not None
                     else (0.0,) * len(outcomes)),
        errors=tuple(o.error for o in outcomes),
        max_output_tokens_per_s=max_tok_s,
        max_concurrent_requests=max_conc,
        ttft=LatencyStats.of([o.ttft_s for o in ok]),
        tpot=LatencyStats.of(tpots),
        itl=LatencyStats.of([x for o in ok for x in o.itl_s]),
        e2el=LatencyStats.of([o.latency_s for o in ok]),
        output_tokens_source=(
            "server usage" if n_ok_usage == len(ok) else
            "token events (server sent no usage)" if n_ok_usage == 0
            else f"server usage for {n_ok_usage} of {len(ok)} requests, token events for the "
                 "rest"),
        input_tokens_source=(
            "server usage" if from_usage == len(outcomes) else
            f"server usage for {from_usage} of {len(outcomes)} requests; the rest: the "
            "request's word count (assumption)"),
        facts=facts,
    )


def summary_rows(result: BenchResult) -> list[tuple[str, str]]:
    """(label, value) pairs for the end-of-run table; missing figures show as 'unknown'."""

    def f(v: float | None, digits: int = 2) -> str:
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return "unknown"
        return f"{v:.{digits}f}" if isinstance(v, float) else str(v)

    power, lag, host = result.facts.power, result.facts.send_lag, result.facts.host
    rows = [
        ("Request rate (req/s, target)", str(result.request_rate)),
        ("Requests completed / failed", f"{result.completed} / {result.failed}"),
        ("Duration (s)", f(result.duration)),
        ("Request throughput (req/s)", f(result.request_throughput, 3)),
        ("Output throughput (tok/s)", f(result.output_throughput, 1)),
        ("Total token throughput (tok/s)", f(result.total_token_throughput, 1)),
    ]
    for st, label in ((result.ttft, "TTFT"), (result.tpot, "TPOT"), (result.itl, "ITL"),
                      (result.e2el, "E2E")):
        rows.append((f"{label} mean / p50 / p99 (ms)",
                     f"{f(st.mean_ms, 1)} / {f(st.median_ms, 1)} / {f(st.p99_ms, 1)}"))
    rows += [
        ("GPU energy (J)", f(power.gpu_energy_j, 1)),
        ("GPU average power (W)", f(power.gpu_avg_power_w, 1)),
        ("GPU energy per output token (J)", f(result.gpu_energy_per_output_token_j, 4)),
        ("Power source", str(power.source)),
        ("Send lag p50 / p99 / max (ms)",
         f"{f(lag.p50_ms, 1)} / {f(lag.p99_ms, 1)} / {f(lag.max_ms, 1)}"),
        ("Host CPUs / limit / throttled (ms)",
         f"{f(host.cpus)} / {f(host.cpu_limit) if host.cpu_limit else 'none or unknown'} / "
         f"{f(host.throttled_ms, 0)}"),
        ("Client CPU share of one core", f(host.client_cpu_share)),
    ]
    if result.partial:
        rows.append(("PARTIAL RESULT", str(result.facts.partial_reason)))
    return rows


def _encode(result: BenchResult) -> str:
    return json.dumps(json_safe(result.to_dict()), allow_nan=False)


def write_results(path: str | os.PathLike[str], results: Sequence[BenchResult]) -> None:
    """Write one result as a JSON object, several as JSON lines (vLLM's ``--append-result``).

    Atomic: a reader (or a run killed meanwhile) sees the former content or the new one."""
    if len(results) == 1:
        atomic_write_text(path, _encode(results[0]) + "\n")
    else:
        atomic_write_text(path, "".join(_encode(r) + "\n" for r in results))
