"""Sustained-load behaviour of one replica, for planning (not the benchmark's bursts).

Main entry: :func:`steady_state` -> :class:`SteadyResult`. Requests arrive as a stationary gamma
renewal process for ``duration_s`` (plus a tail that keeps the load on while the last measured
requests finish); statistics cover requests arriving in ``[warmup_s, duration_s)``. Overload is
detected early: when the waiting queue exceeds ``overload_queue_s`` seconds of arrivals the run
stops and the result says ``OVERLOADED`` instead of simulating an ever-growing queue.

``prefix_cache_hit`` is an assumption the caller states: the share of each prompt already in
vLLM's prefix cache on arrival (:func:`cached_prompt_tokens`; the engine's ``cached_tokens``, the
same mechanism as :func:`fleetplan.replica.protocol.replay`'s ``warm_prefix_cache``, which is
``prefix_cache_hit=1.0``). 0 (default) means fresh prompts.
"""

from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import simpy

from fleetplan._gc import cycles_paused
from fleetplan._progress import Progress
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.errors import InputError
from fleetplan.replica.delivery import client_lags
from fleetplan.replica.engine import ReplicaEngine, Request
from fleetplan.replica.params_record import ReplicaParams
from fleetplan.replica.split_replay import params_engines
from fleetplan.workload.arrivals import arrivals_until
from fleetplan.workload.lengths import LengthModel, protocol_length_model


class SteadyStatus(enum.StrEnum):
    STABLE = "stable"
    OVERLOADED = "overloaded"
    ABOVE = "above"  # stopped once a P99 could only end above its stop_above limit

# the P99s a run may be stopped on (steady_state's stop_above), as the result names them,
# and the Request figure (seconds) each is the P99 of
_FIGURE_OF = {"ttft_p99_ms": "ttft_s", "tpot_p99_ms": "tpot_s", "e2e_p99_ms": "e2e_s"}
P99_LIMITS = tuple(_FIGURE_OF)

@dataclass(frozen=True)
class SteadyResult:
    """Long-run latency and throughput of one replica at one offered rate."""

    model: str
    config: str
    calibrated: bool
    rate: float
    status: SteadyStatus
    measured_requests: int
    throughput_rps: float
    output_tokens_per_s: float
    ttft_p50_ms: float
    ttft_p90_ms: float
    ttft_p99_ms: float
    tpot_p50_ms: float
    tpot_p99_ms: float
    e2e_p50_ms: float
    e2e_p99_ms: float
    queue_mean_ms: float
    utilization: float
    simulated_s: float
    reason: str
    prefix_cache_hit: float = 0.0  # the stated assumption the run used
    # mean share of the idle-to-TDP power range the GPUs drew over the run
    # (fleetplan.replica.power: power that follows the steps' work)
    power_activity: float = 0.0
    # status ABOVE: the P99 (one of P99_LIMITS) proven above its stop_above limit
    stopped_on: str = ""

    @property
    def stable(self) -> bool:
        """True when the queue stayed bounded for the whole run."""
        return self.status is SteadyStatus.STABLE

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        d["stable"] = self.stable
        return d


def check_prefix_cache_hit(hit: float, what: str = "prefix_cache_hit") -> float:
    """``hit`` as a float, or :class:`InputError` unless it is a number in [0, 1]."""
    if isinstance(hit, bool) or not isinstance(hit, int | float) or not 0.0 <= hit <= 1.0:
        raise InputError(f"{what}(={hit!r}) must be a number within [0, 1]")
    return float(hit)


def cached_prompt_tokens(input_tokens: np.ndarray, hit: float) -> np.ndarray | None:
    """Prompt tokens found in the prefix cache per request: ``floor(hit x input_tokens)``.

    ``None`` when ``hit`` is 0 (fresh prompts). The engine (:class:`ReplicaEngine`) then reuses
    only whole KV blocks of them and always recomputes the prompt's last token, as vLLM does, so
    ``hit=1.0`` still prefills at least one token per request.
    """
    hit = check_prefix_cache_hit(hit)
    if hit == 0.0:
        return None
    ins = np.asarray(input_tokens, dtype=np.int64)
    return np.floor(hit * ins + 1e-9).astype(np.int64)


def prefill_tokens(input_tokens: np.ndarray, cached: np.ndarray | None) -> np.ndarray:
    """Prompt tokens each request must prefill (at least one), ignoring block rounding: an
    estimate for routing and planning, not the engine's exact count."""
    ins = np.asarray(input_tokens, dtype=np.int64)
    if cached is None:
        return ins
    return ins - np.minimum(np.asarray(cached, dtype=np.int64), np.maximum(ins - 1, 0))


_EPS = 1e-12  # ReplicaEngine's tolerance on submission times
STEADY_DURATION_S = 600  # steady_state's default run (s)


def arrival_span_s(duration_s: float) -> float:
    """How long a run of ``duration_s`` draws arrivals: its window and a tail that keeps the
    load on while the last measured requests finish."""
    return duration_s + max(30.0, 0.1 * duration_s)


def _pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q)) if a.size else math.nan


def _p99_exceeded_at(n: int) -> int:
    """How many of ``n`` values strictly above a limit make their P99 (NumPy's linear
    percentile) exceed it whatever the others are: the values from the floor of the 99th
    percentile's position ``0.99 (n - 1)`` up are then all above it, plus one for safety."""
    return n - math.floor(0.99 * (n - 1)) + 1


@cycles_paused()
def steady_state(params: ReplicaParams, *, rate: float, lengths: LengthModel | None = None,
                 burstiness: float = 1.0, duration_s: float = STEADY_DURATION_S,
                 warmup_s: float = 60,
                 seed: int = 0, overload_queue_s: float = 30.0,
                 prefix_cache_hit: float = 0.0,
                 stop_above: dict[str, float] | None = None,
                 engine: str = "compiled",
                 progress: Progress | None = None) -> SteadyResult:
    """Sustained behaviour of ``params``' replica under ``rate`` requests/s.

    ``stable`` is False (status ``OVERLOADED``) when the waiting queue grew past
    ``overload_queue_s`` seconds of arrivals (at least 64 requests): the replica cannot sustain
    the rate. Deterministic for a given ``seed``. ``prefix_cache_hit``: the stated share of each
    prompt already in the prefix cache (module docstring); it changes no random draw.

    ``stop_above`` (``{"ttft_p99_ms": 190.0}``, names from :data:`P99_LIMITS`): stop as soon as
    so many measured requests finished above a limit that the run's P99 of that figure must end
    above it whatever the rest do (status ``ABOVE``, ``stopped_on`` naming it; the other figures
    then cover the requests finished so far only). A run that is not stopped is the same as
    without the argument: the verdict "P99 above the limit" is the whole run's, found sooner.

    ``engine``: ``"compiled"`` (default, :mod:`fleetplan.replica.steady_kernel`) or
    ``"simpy"``, the reference :class:`~fleetplan.replica.engine.ReplicaEngine` in a SimPy
    environment; both give the same run (tested), the compiled one 10-30x faster. Parameters
    without chunked prefill (vLLM V0's scheduler, ``ReplicaParams.chunked_prefill``) always
    run on the SimPy engine: the compiled loop has V1's policy only.
    ``progress``: receives the compiled engine's preparation, the one long step of a process's
    first run (:func:`fleetplan.replica.steady_kernel.prepare`).
    """
    hit = check_prefix_cache_hit(prefix_cache_hit)
    if not params.prefix_caching:  # a server without a prefix cache: every prompt fresh
        hit = prefix_cache_hit = 0.0
    for name, v in (("rate", rate), ("burstiness", burstiness), ("duration_s", duration_s),
                    ("warmup_s", warmup_s), ("overload_queue_s", overload_queue_s)):
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise InputError(f"{name}(={v!r}) must be a number")
    if not (rate > 0 and math.isfinite(rate)):
        raise InputError(f"rate(={rate!r}) must be a finite number > 0")
    if not (math.isfinite(duration_s) and duration_s > warmup_s >= 0):
        raise InputError(f"need duration_s(={duration_s!r}) > warmup_s(={warmup_s!r}) >= 0, "
                         "both finite")
    if not (overload_queue_s > 0 and math.isfinite(overload_queue_s)):
        raise InputError(f"overload_queue_s(={overload_queue_s!r}) must be a finite number > 0")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InputError(f"seed(={seed!r}) must be a whole number >= 0")
    if stop_above is not None and not isinstance(stop_above, dict):
        raise InputError(f"stop_above(={stop_above!r}) must be a mapping of P99 names to limits")
    if lengths is not None and not isinstance(lengths, LengthModel):
        raise InputError(f"lengths(={lengths!r}) must be a LengthModel")
    if engine not in ("compiled", "simpy"):
        raise InputError(f"engine(={engine!r}) must be 'compiled' or 'simpy'")
    engines = params_engines(params)
    if engines > 1:
        # data-parallel replicas / pipeline micro-batches: a random split of a Poisson (gamma)
        # stream gives each engine rate / engines; identical engines, so one is simulated and
        # the server serves engines x its throughput at its latencies
        count, gpu = HardwareConfig.split(params.config)
        one = steady_state(params.with_(config=f"{count}x{gpu}"), rate=rate / engines,
                           lengths=lengths, burstiness=burstiness, duration_s=duration_s,
                           warmup_s=warmup_s, seed=seed, overload_queue_s=overload_queue_s,
                           prefix_cache_hit=prefix_cache_hit, stop_above=stop_above,
                           engine=engine, progress=progress)
        return replace(one, config=params.config, rate=float(rate),
                       throughput_rps=one.throughput_rps * engines,
                       output_tokens_per_s=one.output_tokens_per_s * engines,
                       reason=f"{one.reason} (one of the server's {engines} engines, at "
                              f"{rate / engines:g} req/s: docs/replica-model.md)")
    lm = lengths if lengths is not None else protocol_length_model()
    rng = np.random.default_rng([seed, 0x57EAD])
    arr = arrivals_until(arrival_span_s(duration_s), rate, burstiness, rng)
    ins, outs = lm.sample(arr.size, rng)
    cached = cached_prompt_tokens(ins, hit)
    measured = (arr >= warmup_s) & (arr < duration_s)
    n_measured = int(measured.sum())
    watch = _watch(stop_above or {}, n_measured,
                   int((measured & (outs > 1)).sum()) if stop_above else 0)
    if n_measured == 0:
        raise InputError(f"no request arrives in [{warmup_s}, {duration_s}) s at rate {rate}")
    hits = cached if cached is not None else np.zeros(arr.size, dtype=np.int64)
    limit = max(64, int(rate * overload_queue_s))
    # imported here: Numba loads only where a steady-state run is made
    from fleetplan.replica.steady_kernel import STOP_ABOVE, STOP_OVERLOAD, prepare, run_steady

    if not params.chunked_prefill:  # V0's policy: the SimPy engine's scheduler alone has it
        engine = "simpy"
    if engine == "compiled":
        prepare(params, progress)
    run = run_steady if engine == "compiled" else _run_simpy
    first_s, fin_s, sched_s, stop, stopped_i, sim_s, busy_s, active_s = run(
        arr, ins, outs, hits, measured, params=params, limit=limit,
        watch=[(name, lim, need) for name, lim, need, _ in watch])
    status, reason = SteadyStatus.STABLE, f"waiting queue stayed below {limit} requests"
    if stop == STOP_ABOVE:
        name, lim = watch[stopped_i][0], watch[stopped_i][1]
        status = SteadyStatus.ABOVE
        reason = (f"stopped at t={sim_s:.1f} s: enough measured requests finished above "
                  f"{name} {lim:g} to put the run's P99 above it")
    elif stop == STOP_OVERLOAD:
        status = SteadyStatus.OVERLOADED
        reason = (f"waiting queue passed {limit} requests (~{overload_queue_s:g} s of arrivals) "
                  f"at t={sim_s:.1f} s: the replica cannot sustain {rate:g} req/s")
    # the client's view: each stream after the host's lag and the stream delay (zeros without)
    lag_first, lag_last = client_lags(first_s, fin_s, params)
    first_s, fin_s = first_s + lag_first, fin_s + lag_last
    fin = measured & (fin_s == fin_s)
    t_arr, t_first, t_fin, t_sched = arr[fin], first_s[fin], fin_s[fin], sched_s[fin]
    n_out = outs[fin].astype(float)
    ttft = (t_first - t_arr) * 1e3
    e2e = (t_fin - t_arr) * 1e3
    multi = n_out > 1
    tpot = (t_fin[multi] - t_first[multi]) / (n_out[multi] - 1) * 1e3
    queue = (t_sched - t_arr) * 1e3
    n_tokens = int(outs[fin].sum())
    window = duration_s - warmup_s
    sim_s = float(sim_s)
    return SteadyResult(
        model=params.model, config=params.config, calibrated=params.calibrated, rate=float(rate),
        status=status, measured_requests=int(fin.sum()),
        throughput_rps=int(fin.sum()) / window if status is SteadyStatus.STABLE else math.nan,
        output_tokens_per_s=(n_tokens / window
                             if status is SteadyStatus.STABLE else math.nan),
        ttft_p50_ms=_pct(ttft, 50), ttft_p90_ms=_pct(ttft, 90), ttft_p99_ms=_pct(ttft, 99),
        tpot_p50_ms=_pct(tpot, 50), tpot_p99_ms=_pct(tpot, 99),
        e2e_p50_ms=_pct(e2e, 50), e2e_p99_ms=_pct(e2e, 99),
        queue_mean_ms=float(queue.mean()) if queue.size else math.nan,
        utilization=min(1.0, busy_s / sim_s) if sim_s > 0 else 0.0,
        simulated_s=sim_s, reason=reason, prefix_cache_hit=hit,
        power_activity=min(1.0, active_s / sim_s) if sim_s > 0 else 0.0,
        stopped_on=watch[stopped_i][0] if stop == STOP_ABOVE else "",
    )


def _run_simpy(arr: np.ndarray, ins: np.ndarray, outs: np.ndarray, hits: np.ndarray,
               measured: np.ndarray, *, params: ReplicaParams, limit: int,
               watch: list[tuple[str, float, int]]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int, float, float, float]:
    """:func:`fleetplan.replica.steady_kernel.run_steady` on the reference engine (SimPy)."""
    env = simpy.Environment()
    is_measured = measured.tolist()
    left = [int(measured.sum())]
    done_ev = env.event()
    seen = [0] * len(watch)
    stopped: list[int] = []  # the watch entry the run stopped on

    def on_finish(r: Request) -> None:
        if is_measured[r.rid]:
            left[0] -= 1
            for w, (name, lim, need) in enumerate(watch):
                # a one-token reply's TPOT is NaN, never above a limit (as the P99 skips it)
                if getattr(r, _FIGURE_OF[name]) * 1e3 > lim:
                    seen[w] += 1
                    if seen[w] >= need and not stopped:
                        stopped.append(w)
            if (left[0] == 0 or stopped) and not done_ev.triggered:
                done_ev.succeed()

    engine = ReplicaEngine(env, params, on_finish, record_itl=False)
    # plain Python floats and ints (int64 draws), one conversion for the whole run
    times, in_tok, out_tok, hit_tok = arr.tolist(), ins.tolist(), outs.tolist(), hits.tolist()
    reqs: list[Request] = []
    overload = env.event()

    def source(env: simpy.Environment):  # type: ignore[no-untyped-def]
        # The waiting queue is checked against the limit when the source wakes for an arrival.
        # Arrivals add one request each, so after a check that finds ``q`` queued the next
        # ``limit - q`` arrivals cannot pass it by themselves: they are submitted ahead, each
        # at its own arrival instant (``at``: the clock a wake-up would have read), without an
        # event of their own, and the source wakes for the next one. A run that never nears
        # the limit is the same as with a wake-up per arrival; requests sent back to the queue
        # by preemption are seen at the next check, at most ``limit - q`` arrivals later.
        now = env.now
        ahead = 0
        for i, t in enumerate(times):
            r = Request(i, t, in_tok[i], out_tok[i], cached_tokens=hit_tok[i])
            reqs.append(r)
            dt = t - now
            if dt > 0:
                now = now + dt  # the clock a timeout of dt from the last arrival lands on
            if ahead > 0:
                ahead -= 1
                engine.submit(r, at=now if now >= env.now - _EPS else env.now)
                continue
            if now > env.now:
                yield env.timeout(now - env.now)
            # after ~1e5 s a timeout can land an ulp past the clock it was asked for
            engine.submit(r, at=now if now >= env.now - _EPS else env.now)
            if engine.queue_len > limit and not overload.triggered:
                overload.succeed()
                return
            ahead = limit - engine.queue_len

    env.process(source(env))
    env.run(until=env.any_of([done_ev, overload]))
    n = arr.size
    first_s, fin_s, sched_s = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    for r in reqs:
        first_s[r.rid], fin_s[r.rid], sched_s[r.rid] = r.first_token_s, r.finish_s, r.scheduled_s
    from fleetplan.replica.steady_kernel import STOP_ABOVE, STOP_DONE, STOP_OVERLOAD

    stop = STOP_ABOVE if stopped else (STOP_OVERLOAD if overload.triggered else STOP_DONE)
    reqs.clear()  # the requests go now, not at the next cycle collection (fleetplan._gc)
    return (first_s, fin_s, sched_s, stop, stopped[0] if stopped else -1, float(env.now),
            engine.busy_s, engine.stats.active_s)


Watch = list[tuple[str, float, int, list[int]]]  # (figure, limit, count that decides, seen)


def _watch(stop_above: dict[str, float], n_measured: int, n_multi_token: int) -> Watch:
    """The limits of ``stop_above`` with the count of requests above each that decides the
    run's P99 (TPOT is over requests of more than one output token)."""
    out: Watch = []
    for name in sorted(stop_above):
        lim = stop_above[name]
        if name not in P99_LIMITS:
            raise InputError(f"stop_above: {name!r} is not one of {', '.join(P99_LIMITS)}")
        if isinstance(lim, bool) or not isinstance(lim, int | float) or not lim >= 0:
            raise InputError(f"stop_above.{name}(={lim!r}) must be a number >= 0")
        try:
            lim = float(lim)
        except OverflowError:
            lim = math.inf  # an integer beyond floats: no limit
        n = n_multi_token if name == "tpot_p99_ms" else n_measured
        if n > 0 and math.isfinite(lim):
            out.append((name, float(lim), _p99_exceeded_at(n), [0]))
    return out
