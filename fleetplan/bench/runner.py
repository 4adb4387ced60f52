"""The load generator: send requests at gamma-distributed times, stream them, collect a result.

Main entries: :func:`run_benchmark` (async, one rate), :func:`run` and :func:`run_sweep`
(synchronous wrappers that turn Ctrl-C into a partial result); the settings and the send
schedule are :mod:`fleetplan.bench.config`'s (:class:`BenchConfig`, :func:`send_schedule`, also
importable from here).

Protocol (as ``vllm bench serve``): one untimed test request first (a wrong URL or model fails
here, not 200 times), then request ``i`` is sent at its scheduled time whatever the server's
state; ``max_concurrency`` makes requests wait for a free slot (their wait is ``queue_times``);
the run lasts until every request sent has finished. Two schedules:

- ``first-at-zero`` (default): :func:`fleetplan.workload.arrivals.benchmark_arrivals`, request 0
  at t=0 then ``n-1`` gamma gaps: the vLLM 0.8 client that measured fleetplan's bundled profiles
  (and that the replica model's replay reproduces).
- ``normalized``: current vLLM (0.32): ``n`` gamma gaps, request 0 after the first, all rescaled so
  the last request is sent at ``n / rate``.

Both draw the gaps as vLLM does, from numpy's legacy generator seeded with ``seed`` (a private
``RandomState``), so the same seed gives vLLM's send times exactly (:func:`send_schedule`).

Never hangs: each request has ``request_timeout_s`` for everything; ``deadline_s`` bounds the rate
from its start (the version probe and the test request included); on the deadline or a stop
(Ctrl-C) whatever runs is cancelled (requests in flight are recorded as failed, requests not yet
sent are dropped) and the result says ``partial`` with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp
import numpy as np

from fleetplan import __version__
from fleetplan.bench.config import MAX_SCHEDULE_S, BenchConfig, send_schedule
from fleetplan.bench.host import HostFacts, start_host_watch
from fleetplan.bench.power import PowerReport, open_power
from fleetplan.bench.requests import BenchRequest
from fleetplan.bench.response import version_of
from fleetplan.bench.result import BenchResult, RunFacts, RunHeader, SendLag, bench_result
from fleetplan.bench.stream import RequestOutcome, payload_for, stream_request
from fleetplan.errors import FleetplanError, InputError

__all__ = ["MAX_SCHEDULE_S", "SEND_LAG_WARN_MS", "BenchConfig", "BenchError", "run",
           "run_benchmark", "run_sweep", "send_lag", "send_lag_fields", "send_schedule"]

Progress = Callable[[int, int, int], None]  # (finished, failed, total)
_MAX_VERSION_BYTES = 1 << 16
_NOT_STARTED = PowerReport(status="unknown", source="not measured: the run stopped before its "
                           "first request")


class BenchError(FleetplanError):
    """The benchmark could not run (server unreachable, test request refused). In a sweep,
    ``completed`` holds the results of the rates that ran before it."""

    completed: list[BenchResult]

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.completed = []


@dataclass
class _Run:
    cfg: BenchConfig
    requests: Sequence[BenchRequest]
    on_progress: Progress | None
    outcomes: dict[int, RequestOutcome] = field(default_factory=dict)
    queue: dict[int, float] = field(default_factory=dict)
    failed: int = 0
    t0: float = 0.0
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def _one(self, client: aiohttp.ClientSession, i: int, sem: asyncio.Semaphore | None,
                   headers: dict[str, str]) -> None:
        body = payload_for(self.cfg.api, self.cfg.model, self.requests[i], self.cfg.ignore_eos)
        arrived = time.perf_counter()
        try:
            async with sem if sem is not None else contextlib.nullcontext():
                self.queue[i] = time.perf_counter() - arrived
                out = await stream_request(client, self.cfg.url, body, i,
                                           self.cfg.request_timeout_s, headers)
        except asyncio.CancelledError:
            out = RequestOutcome(index=i, start_s=arrived, error="cancelled: run stopped")
            self.outcomes[i] = out
            self.queue.setdefault(i, time.perf_counter() - arrived)
            self.failed += 1
            raise
        self.outcomes[i] = out
        self.failed += 0 if out.success else 1
        if self.on_progress is not None:
            self.on_progress(len(self.outcomes), self.failed, len(self.requests))

    async def drive(self, client: aiohttp.ClientSession, offsets: np.ndarray,
                    headers: dict[str, str]) -> None:
        sem = asyncio.Semaphore(self.cfg.max_concurrency) if self.cfg.max_concurrency else None
        try:
            for i, off in enumerate(offsets):
                delay = self.t0 + float(off) - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                self.tasks.append(asyncio.create_task(self._one(client, i, sem, headers)))
            await asyncio.gather(*self.tasks)
        finally:
            for t in self.tasks:
                t.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)


def check_version(stated: str | None, served: str | None, base_url: str) -> None:
    """Refuse a run whose server answers ``/version`` with another version than the one the
    user stated (``--engine-version``), before anything is measured: the result would claim
    one of the two falsely. The stated version may omit the server's build suffix (``0.8.5``
    matches ``0.8.5.post1`` and ``0.8.5+cu124``). A server that does not answer contradicts
    nothing (the stated version is recorded)."""
    if stated is None or served is None or served == stated:
        return
    if served.startswith(stated) and served[len(stated)] in ".+-":
        return
    raise BenchError(f"--engine-version {stated} contradicts the server's own version {served} "
                     f"({base_url}/version); nothing was measured")


async def _engine_version(client: aiohttp.ClientSession, base: str) -> str | None:
    """The server's ``/version`` (a short printable string), else None; reads at most 64 KiB."""
    try:
        async with client.get(base + "/version",
                              timeout=aiohttp.ClientTimeout(total=5.0)) as r:
            if r.status != 200:
                return None
            data = await r.content.read(_MAX_VERSION_BYTES)
        return version_of(json.loads(data))
    except (aiohttp.ClientError, TimeoutError, ValueError, RecursionError):
        return None


async def _prepare(client: aiohttp.ClientSession, cfg: BenchConfig, first: BenchRequest,
                   headers: dict[str, str]) -> tuple[str | None, RequestOutcome | None]:
    """The untimed phase: the engine's version, then the test request (if asked)."""
    version = await _engine_version(client, cfg.base_url)
    if not cfg.test_request:
        return version, None
    body = payload_for(cfg.api, cfg.model, first, cfg.ignore_eos)
    return version, await stream_request(client, cfg.url, body, -1, cfg.request_timeout_s,
                                         headers)


async def _race(task: asyncio.Task[Any], stop: asyncio.Event, cfg: BenchConfig,
                deadline_at: float | None) -> str | None:
    """Wait for ``task``; on a stop (Ctrl-C) or the deadline cancel it and return the reason."""
    stopper = asyncio.create_task(stop.wait())
    timeout = None if deadline_at is None else max(0.0, deadline_at - time.perf_counter())
    try:
        done, _ = await asyncio.wait({task, stopper}, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    reason = None
    if task not in done:
        reason = ("interrupted (Ctrl-C)" if stopper in done
                  else f"deadline of {cfg.deadline_s:g} s reached")
        task.cancel()
    await asyncio.gather(task, stopper, return_exceptions=True)
    return reason


async def run_benchmark(cfg: BenchConfig, requests: Sequence[BenchRequest],
                        on_progress: Progress | None = None,
                        stop: asyncio.Event | None = None) -> BenchResult:
    """Run one benchmark and return its result (see :mod:`fleetplan.bench.result`).

    ``stop`` (set by Ctrl-C in :func:`run`) ends the run early with a partial result, as the
    deadline does; both also end the test request (the result then holds no request). Raises
    :class:`BenchError` when the test request fails.
    """
    started = time.perf_counter()
    deadline_at = started + cfg.deadline_s if cfg.deadline_s is not None else None
    if len(requests) != cfg.num_prompts:
        raise InputError(f"{len(requests)} requests given for num_prompts={cfg.num_prompts}")
    offsets = send_schedule(cfg)
    headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
    # no connection limit unless --max-concurrency (then the semaphore already bounds it);
    # requests are bounded by their own asyncio.timeout in stream_request
    connector = aiohttp.TCPConnector(limit=cfg.max_concurrency or 0,
                                     limit_per_host=cfg.max_concurrency or 0,
                                     keepalive_timeout=60, force_close=False)
    stop = stop if stop is not None else asyncio.Event()
    run = _Run(cfg, requests, on_progress)
    async with aiohttp.ClientSession(connector=connector, trust_env=False,
                                     timeout=aiohttp.ClientTimeout(total=None)) as client:
        prep = asyncio.create_task(_prepare(client, cfg, requests[0], headers))
        partial_reason = await _race(prep, stop, cfg, deadline_at)
        if partial_reason is not None:
            run.t0 = time.perf_counter()
            return _assemble(cfg, requests, run, [], 0.0, _NOT_STARTED, None,
                             f"{partial_reason} during the test request; 0 of "
                             f"{cfg.num_prompts} requests sent", offsets)
        version, test = prep.result()
        check_version(cfg.engine_version, version, cfg.base_url)
        if test is not None and not test.success:
            raise BenchError(f"the test request to {cfg.url} failed: {test.error}")
        power = open_power(cfg.power, list(cfg.power_gpus) if cfg.power_gpus else None)
        power.start()
        report: PowerReport | None = None
        try:
            run.t0 = time.perf_counter()
            watch = start_host_watch()
            driver = asyncio.create_task(run.drive(client, offsets, headers))
            partial_reason = await _race(driver, stop, cfg, deadline_at)
            duration = time.perf_counter() - run.t0
            host = watch.stop()
        finally:
            report = power.stop()
    sent = sorted(run.outcomes)
    if partial_reason is not None:
        partial_reason += f"; {len(sent)} of {cfg.num_prompts} requests sent"
    return _assemble(cfg, requests, run, sent, duration, report, version, partial_reason,
                     offsets, host)


def _assemble(cfg: BenchConfig, requests: Sequence[BenchRequest], run: _Run, sent: list[int],
              duration: float, power: PowerReport, version: str | None,
              partial_reason: str | None, offsets: np.ndarray,
              host: HostFacts | None = None) -> BenchResult:
    header = RunHeader(
        date=datetime.now(UTC).strftime("%Y%m%d-%H%M%S"),
        endpoint_type="openai" if cfg.api == "completions" else "openai-chat",
        backend="openai" if cfg.api == "completions" else "openai-chat",
        label=cfg.label,
        model_id=cfg.model,
        tokenizer_id=None,
        num_prompts=cfg.num_prompts,
        request_rate=cfg.rate,
        burstiness=cfg.burstiness,
        max_concurrency=cfg.max_concurrency,
    )
    # GPUs of one replica: as stated, else the tensor-parallel size stated (as ingest and
    # validate read it), else the GPUs NVML measured
    gpu_count = cfg.gpu_count or (cfg.tp * (cfg.pp or 1) * (cfg.dp or 1) if cfg.tp else None) or (
        len(power.gpu_names) if power.gpu_names else None)
    gpu = cfg.gpu or (power.gpu_names[0] if power.gpu_names else None)
    facts = RunFacts(
        engine="vllm" if version or cfg.engine_version else "unknown",
        # the server's own answer (checked against the stated one), else what the user stated
        engine_version=version or cfg.engine_version,
        dataset_name=cfg.dataset_name,
        gpu=gpu,
        gpu_count=gpu_count,
        power=power,
        partial=partial_reason is not None,
        partial_reason=partial_reason,
        num_sent=len(sent),
        seed=cfg.seed,
        arrival_schedule=cfg.arrival_schedule,
        ignore_eos=cfg.ignore_eos,
        request_timeout_s=cfg.request_timeout_s,
        endpoint=cfg.url,
        client=f"fleetplan {__version__} bench",
        send_lag=send_lag([run.outcomes[i].start_s - run.t0 - float(offsets[i]) for i in sent]),
        host=host or HostFacts(),
        tensor_parallel_size=cfg.tp,
        pipeline_parallel_size=cfg.pp,
        data_parallel_size=cfg.dp,
        num_nodes=cfg.nodes,
        engine_args=dict(cfg.engine_args),
    )
    fallback = [requests[i].prompt_tokens or len(requests[i].prompt.split()) for i in sent]
    return bench_result([run.outcomes[i] for i in sent], t0=run.t0, duration_s=duration,
                        header=header, facts=facts,
                        queue_times=[run.queue.get(i, 0.0) for i in sent],
                        fallback_prompt_tokens=fallback)


# The client kept its schedule when the 99th percentile of its send lag is within this many ms;
# beyond it the arrival process the server saw was not the one asked for (see send_lag).
SEND_LAG_WARN_MS = 50.0


def send_lag(lags_s: Sequence[float]) -> SendLag:
    """How late the client sent requests against its schedule (ms; p50, p99, max).

    A late send means the client itself was starved of CPU (it shares cores with the server, or
    it is overloaded): the server then saw a burstier, later arrival process than the one asked
    for, and TTFT/ITL measured by a starved client include the client's own delay.
    """
    if not lags_s:
        return SendLag()
    ms = np.maximum(np.asarray(lags_s, dtype=float), 0.0) * 1000.0
    return SendLag(p50_ms=round(float(np.percentile(ms, 50)), 3),
                   p99_ms=round(float(np.percentile(ms, 99)), 3),
                   max_ms=round(float(ms.max()), 3))


def send_lag_fields(lags_s: Sequence[float]) -> dict[str, Any]:
    """:func:`send_lag` as the result's ``send_lag_*_ms`` fields."""
    return send_lag(lags_s).fields()


def _with_sigint(coro_fn: Callable[[asyncio.Event], Any]) -> Any:
    """Run ``coro_fn(stop)``; the first Ctrl-C sets ``stop``, a second one aborts."""

    async def main() -> Any:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        installed = threading.current_thread() is threading.main_thread()

        def on_sigint() -> None:
            stop.set()
            loop.remove_signal_handler(signal.SIGINT)

        if installed:
            loop.add_signal_handler(signal.SIGINT, on_sigint)
        try:
            return await coro_fn(stop)
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)

    return asyncio.run(main())


def run(cfg: BenchConfig, requests: Sequence[BenchRequest],
        on_progress: Progress | None = None) -> BenchResult:
    """Synchronous :func:`run_benchmark`; Ctrl-C returns the partial result."""
    return _with_sigint(lambda stop: run_benchmark(cfg, requests, on_progress, stop))  # type: ignore[no-any-return]


def run_sweep(cfg: BenchConfig, rates: Sequence[float], requests: Sequence[BenchRequest],
              on_start: Callable[[float], None] | None = None,
              on_progress: Progress | None = None,
              on_result: Callable[[BenchResult], None] | None = None) -> list[BenchResult]:
    """One run per rate, in the order given, same requests and seed; Ctrl-C ends the sweep
    after the partial result of the rate in progress.

    ``on_result`` gets each rate's result as soon as it is complete (the CLI writes it then), so
    a later rate's :class:`BenchError` (its test request failed), which ends the sweep, loses
    nothing that was measured before it; the error carries those results in ``completed``.
    """

    async def sweep(stop: asyncio.Event) -> list[BenchResult]:
        out: list[BenchResult] = []
        for r in rates:
            if stop.is_set():
                break
            if on_start is not None:
                on_start(r)
            try:
                res = await run_benchmark(cfg.model_copy(update={"rate": r}), requests,
                                          on_progress, stop)
            except BenchError as exc:
                exc.completed = list(out)
                raise
            out.append(res)
            if on_result is not None:
                on_result(res)
        return out

    return _with_sigint(sweep)  # type: ignore[no-any-return]
