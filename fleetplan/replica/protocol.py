"""Replay of vLLM's serving benchmark against the replica model, and its metrics.

Main entries: :func:`replay` (N prompts, gamma gaps, no concurrency cap unless given, the run
ends when the last response ends; averaged over length seeds) returning a :class:`ReplayResult`,
and :func:`vllm_arrivals` (the exact send times of ``benchmark_serving.py --seed S``: numpy's
legacy generator seeded with S draws one gamma gap after each request, so the measured runs'
arrivals can be reproduced, not just their distribution).

Metrics are computed as vLLM's ``calculate_metrics`` does: TTFT over completed requests, TPOT
``(e2e - ttft) / (output - 1)`` over requests with more than one output token, ITL over every
token gap, percentiles by ``numpy.percentile``; duration from the first send to the later of the
last response and the end of the client's final sleep (``get_request`` sleeps one more gap after
the last send before the client gathers the responses).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
import simpy

from fleetplan._notebook import NotebookRepr
from fleetplan.errors import InputError
from fleetplan.replica.delivery import client_lags
from fleetplan.replica.engine import ReplicaEngine, Request
from fleetplan.replica.params_record import ReplicaParams
from fleetplan.replica.prefix_cache import cached_prompt_tokens, hit_share
from fleetplan.replica.split_replay import params_engines, replay_engines
from fleetplan.workload.arrivals import benchmark_arrivals, gamma_gaps
from fleetplan.workload.lengths import LengthModel, protocol_length_model

METRICS = (
    "request_throughput", "output_throughput", "ttft_mean_ms", "ttft_p50_ms", "ttft_p90_ms",
    "ttft_p99_ms", "tpot_mean_ms", "tpot_p50_ms", "tpot_p99_ms", "itl_mean_ms", "itl_p50_ms",
    "itl_p99_ms", "duration_s",
)


@dataclass(frozen=True)
class MetricStat:
    """One metric over seeds: mean, sample standard deviation, the per-seed values."""

    mean: float
    std: float
    values: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "std": self.std, "values": list(self.values)}


@dataclass(frozen=True)
class ReplayResult(NotebookRepr):
    """A replayed benchmark run: metric name -> :class:`MetricStat`, with its inputs."""

    model: str
    config: str
    calibrated: bool
    rate: float
    num_prompts: int
    burstiness: float
    seeds: tuple[int, ...]
    arrival_seed: int | None
    metrics: dict[str, MetricStat] = field(default_factory=dict)
    preemptions: float = 0.0

    def __getitem__(self, name: str) -> float:
        return self.metrics[name].mean

    def to_frame(self) -> pd.DataFrame:
        """One row per metric: mean and standard deviation over the seeds."""
        return pd.DataFrame([{"metric": k, "mean": v.mean, "std": v.std}
                             for k, v in self.metrics.items()])

    def _summary(self) -> str:
        cal = "calibrated" if self.calibrated else "spec-based (calibrated: false)"
        return (f"{self.model} on {self.config} ({cal}): {self.num_prompts} prompts at "
                f"{self.rate:g} req/s, a burst that the server then drains")

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "config": self.config, "calibrated": self.calibrated,
            "request_rate": self.rate, "num_prompts": self.num_prompts,
            "burstiness": self.burstiness, "seeds": list(self.seeds),
            "arrival_seed": self.arrival_seed,
            "metrics": {k: v.to_dict() for k, v in self.metrics.items()},
            "preemptions_mean": self.preemptions,
        }


def vllm_arrivals(n: int, rate: float, burstiness: float, seed: int) -> tuple[np.ndarray, float]:
    """Send times of ``benchmark_serving.py --seed seed`` and the end of its final sleep.

    vLLM 0.8.5 seeds numpy's global legacy generator with ``--seed`` and draws
    ``np.random.gamma(burstiness, 1/(rate*burstiness))`` after yielding each request; a private
    ``RandomState(seed)`` gives the same stream without touching global state.
    """
    if n < 1:
        raise InputError(f"num_prompts(={n}) must be >= 1")
    if not rate > 0:
        raise InputError(f"rate(={rate!r}) must be > 0")
    if math.isinf(rate):
        return np.zeros(n), 0.0
    gaps = np.random.RandomState(seed).gamma(burstiness, 1.0 / (rate * burstiness), size=n)
    times = np.concatenate([[0.0], np.cumsum(gaps[:-1])])
    return times, float(times[-1] + gaps[-1])


def match_total(x: np.ndarray, total: int, lo: int, hi: np.ndarray | int) -> np.ndarray:
    """Rescale integer counts ``x`` so they sum to ``total`` within ``[lo, hi]`` (elementwise),
    keeping their shape; the rounding residue goes to the largest entries first."""
    hi_arr = np.broadcast_to(np.asarray(hi, dtype=np.int64), x.shape)
    if total < lo * x.size:
        raise InputError(f"cannot spread {total} tokens over {x.size} requests: each takes at "
                         f"least {lo}, the length model's shortest ({lo * x.size} in all)")
    if total > int(hi_arr.sum()):
        raise InputError(f"cannot spread {total} tokens over {x.size} requests: their limits "
                         f"(max_model_len and the lengths' caps) hold {int(hi_arr.sum())} in all")
    y = np.clip(np.rint(x * (total / max(int(x.sum()), 1))), lo, hi_arr).astype(np.int64)
    order = np.argsort(-x, kind="stable")
    for _ in range(64):
        diff = total - int(y.sum())
        if diff == 0:
            break
        room = (hi_arr - y) if diff > 0 else (y - lo)
        idx = order[room[order] > 0]
        if idx.size == 0:
            break
        step = np.sign(diff) * np.minimum(room[idx], -(-abs(diff) // idx.size))
        cum = np.cumsum(np.abs(step))
        take = cum <= abs(diff)
        y[idx[take]] += step[take]
        rest = abs(diff) - int(np.abs(step[take]).sum())
        if rest and not take.all():
            j = idx[np.argmin(take)]
            y[j] += int(np.sign(diff)) * rest
    return y


def intake_release(arrivals: np.ndarray, per_request_s: float) -> np.ndarray:
    """When each request, sent at ``arrivals`` (s), reaches the scheduler through a serial
    intake: the server takes requests in one at a time, ``per_request_s`` each (HTTP,
    tokenization: the parameters' ``overhead_s``), and a busy period's requests reach the
    engine together when it ends (every request sent while the intake is busy extends it).

    What a burst shows in vLLM 0.5.4's own per-request arrays (LambdaLabsML/vllm-benchmark,
    320 prompts sent at once on one H100 and one A100: no first token before 0.8 s and 1.3 s,
    then one step's prompts each step; docs/replica-model.md "Bursts on old vLLM"). A request
    arriving at an idle intake reaches it ``per_request_s`` later, as with the parallel
    overhead of :class:`~fleetplan.replica.engine.ReplicaEngine`."""
    arr = np.asarray(arrivals, dtype=float)
    order = np.argsort(arr, kind="stable")
    out = np.empty_like(arr)
    free = -math.inf
    members: list[int] = []
    for i in order:
        t = float(arr[i])
        if t >= free and members:  # the intake went idle: its busy period ends at ``free``
            out[members] = free
            members = []
        free = max(free, t) + per_request_s
        members.append(int(i))
    if members:
        out[members] = free
    return out


def simulate_requests(params: ReplicaParams, arrivals: np.ndarray, ins: np.ndarray,
                      outs: np.ndarray, *, cached: np.ndarray | None = None,
                      max_concurrency: int | None = None,
                      serial_intake: bool = False) -> tuple[list[Request], ReplicaEngine]:
    """Run one set of requests through a fresh engine; returns the finished requests.
    ``serial_intake`` (without ``max_concurrency``): requests reach the scheduler as
    :func:`intake_release` says, instead of each ``overhead_s`` after its arrival."""
    env = simpy.Environment()
    reqs = [Request(i, float(t), int(a), int(b),
                    cached_tokens=int(cached[i]) if cached is not None else 0)
            for i, (t, a, b) in enumerate(zip(arrivals, ins, outs, strict=True))]
    if max_concurrency is None:
        engine = ReplicaEngine(env, params)
        # the engine adds overhead_s to a submission: submit each at its release less that
        sent = ([float(t) for t in intake_release(arrivals, params.overhead_s)
                 - params.overhead_s] if serial_intake and reqs
                else [r.arrival_s for r in reqs])
        if all(a <= b for a, b in zip(sent, sent[1:], strict=False)):
            for r, t in zip(reqs, sent, strict=True):  # known in advance, in order: no event
                engine.submit(r, at=t)
        else:
            def sender(r: Request) -> Callable[[simpy.Event], None]:
                return lambda _ev: engine.submit(r)

            for r, t in zip(reqs, sent, strict=True):
                env.timeout(t).callbacks.append(sender(r))
        env.run()
        return reqs, engine
    # client-side cap: a request is sent at max(its time, a slot freeing up)
    slots = [max_concurrency]
    queue: list[Request] = []

    def release(_r: Request) -> None:
        if queue:
            nxt = queue.pop(0)
            nxt.arrival_s = env.now
            engine.submit(nxt)
        else:
            slots[0] += 1

    engine = ReplicaEngine(env, params, on_finish=release)

    def send_capped(r: Request) -> None:
        if slots[0] > 0:
            slots[0] -= 1
            engine.submit(r)
        else:
            queue.append(r)

    def capped_sender(r: Request) -> Callable[[simpy.Event], None]:
        return lambda _ev: send_capped(r)

    for r in reqs:
        env.timeout(r.arrival_s).callbacks.append(capped_sender(r))
    env.run()
    return reqs, engine


def _weighted_percentile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """``np.percentile`` (linear) of the multiset where each value appears ``weight`` times."""
    order = np.argsort(values, kind="stable")
    v, cw = values[order], np.cumsum(weights[order])
    k = q / 100.0 * (cw[-1] - 1)
    lo, hi = math.floor(k), math.ceil(k)
    vlo = v[np.searchsorted(cw, lo + 1)]
    vhi = v[np.searchsorted(cw, hi + 1)]
    return float(vlo + (vhi - vlo) * (k - lo))


def itl_stats(engine: ReplicaEngine) -> tuple[float, float, float]:
    """Mean, p50 and p99 (ms) of every token gap the engine recorded."""
    st = engine.stats
    if not st.itl_segments and not st.itl_single:
        return math.nan, math.nan, math.nan
    seg = np.asarray(st.itl_segments, dtype=float).reshape(-1, 4)
    n = seg[:, 2].astype(np.int64)
    start = np.repeat(np.cumsum(n) - n, n)
    k = np.arange(int(n.sum())) - start
    vals = np.repeat(seg[:, 0], n) + np.repeat(seg[:, 1], n) * k
    w = np.repeat(seg[:, 3], n).astype(np.int64)
    if st.itl_single:
        vals = np.concatenate([vals, np.asarray(st.itl_single)])
        w = np.concatenate([w, np.ones(len(st.itl_single), dtype=np.int64)])
    mean = float(np.dot(vals, w) / w.sum())
    return (mean * 1e3, _weighted_percentile(vals, w, 50) * 1e3,
            _weighted_percentile(vals, w, 99) * 1e3)


def run_metrics(reqs: Sequence[Request], engine: ReplicaEngine,
                end_min_s: float) -> dict[str, float]:
    """vLLM's benchmark metrics of one simulated run."""
    outs = np.array([r.output_tokens for r in reqs])
    fin = np.array([r.finish_s for r in reqs])
    first = np.array([r.first_token_s for r in reqs])
    # the client receives each stream after the host's lag and the stream delay
    # (fleetplan.replica.delivery)
    lag_first, lag_last = client_lags(first, fin, engine.params)
    first, fin = first + lag_first, fin + lag_last
    ttft = (first - np.array([r.arrival_s for r in reqs])) * 1e3
    multi = outs > 1
    tpot = (fin[multi] - first[multi]) / (outs[multi] - 1) * 1e3
    itl_mean, itl_p50, itl_p99 = itl_stats(engine)
    duration = max(float(fin.max()), end_min_s)
    out = {
        "request_throughput": len(reqs) / duration,
        "output_throughput": float(outs.sum()) / duration,
        "ttft_mean_ms": float(ttft.mean()),
        "ttft_p50_ms": float(np.percentile(ttft, 50)),
        "ttft_p90_ms": float(np.percentile(ttft, 90)),
        "ttft_p99_ms": float(np.percentile(ttft, 99)),
        "duration_s": duration,
    }
    ok = tpot.size > 0
    out["tpot_mean_ms"] = float(tpot.mean()) if ok else math.nan
    out["tpot_p50_ms"] = float(np.percentile(tpot, 50)) if ok else math.nan
    out["tpot_p99_ms"] = float(np.percentile(tpot, 99)) if ok else math.nan
    out["itl_mean_ms"], out["itl_p50_ms"], out["itl_p99_ms"] = itl_mean, itl_p50, itl_p99
    return out


def sample_lengths(lengths: LengthModel, n: int, seed: int,
                   totals: tuple[int, int] | None = None,
                   pinned_outputs: Sequence[tuple[int, int]] = (),
                   max_model_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``n`` (input, output) pairs for a seed; with ``totals``, rescaled to those token sums
    (a measured run's ``total_input_tokens`` and ``total_output_tokens``). ``pinned_outputs``:
    (index, output tokens) of requests whose length is known (the replies that end a burst,
    :mod:`fleetplan.replica.burst_tail`); the other outputs share the rest of the total.
    ``max_model_len``: the server's context; no pair exceeds it (a server never completes one
    that does, so a run's lengths never did), outputs cut where a draw or a rescaling would."""
    ins, outs = lengths.sample(n, np.random.default_rng(seed))
    if totals is not None:
        ins = match_total(ins, totals[0], lengths.input.min, lengths.input.max)
    limit = lengths.max_total
    if max_model_len is not None and int(ins.max()) + lengths.output.max > max_model_len:
        limit = max_model_len if limit is None else min(limit, max_model_len)
        ins = np.minimum(ins, max_model_len - lengths.output.min)
    cap = lengths.output.max if limit is None else np.minimum(lengths.output.max, limit - ins)
    cap_arr = np.broadcast_to(np.asarray(cap, dtype=np.int64), outs.shape)
    free = np.ones(n, dtype=bool)
    for i, tokens in pinned_outputs:
        if 0 <= i < n:
            outs[i] = max(lengths.output.min, min(int(tokens), int(cap_arr[i])))
            free[i] = False
    if totals is not None:
        rest = totals[1] - int(outs[~free].sum())
        lo = lengths.output.min
        if free.all() or lo * int(free.sum()) > rest or rest > int(cap_arr[free].sum()):
            free[:] = True  # the pins do not fit this run's total: plain rescaling
            rest = totals[1]
        if rest > int(cap_arr[free].sum()):  # the context cuts more than the run's total allows
            outs[free] = cap_arr[free]
        else:
            outs[free] = match_total(outs[free], rest, lo, cap_arr[free])
    elif limit is not None:
        outs = np.minimum(outs, cap_arr)
    return ins, outs


def _known_lengths(lengths: tuple[Sequence[int], Sequence[int]], n: int,
                   max_model_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Recorded (prompt, reply) tokens as arrays, checked: one pair per request, every count
    >= 1; a pair longer than the context is cut to it (prompt first keeps one reply token)."""
    ins = np.asarray(lengths[0], dtype=np.int64)
    outs = np.asarray(lengths[1], dtype=np.int64)
    if ins.shape != (n,) or outs.shape != (n,):
        raise InputError(f"request_lengths: need {n} prompt and {n} reply counts, got "
                         f"{ins.size} and {outs.size}")
    if n and (int(ins.min()) < 1 or int(outs.min()) < 1):
        raise InputError("request_lengths: every prompt and reply count must be >= 1")
    ins = np.minimum(ins, max_model_len - 1)
    return ins, np.minimum(outs, max_model_len - ins)


def simulate_one(params: ReplicaParams, *, seed: int, rate: float, num_prompts: int,
                 burstiness: float, max_concurrency: int | None, lengths: LengthModel,
                 arrival_seed: int | None, totals: tuple[int, int] | None,
                 warm_prefix_cache: bool,
                 request_lengths: tuple[Sequence[int], Sequence[int]] | None,
                 pinned_outputs: Sequence[tuple[int, int]] = (),
                 prefix_runs_before: int | None = None,
                 prefix_capacity_tokens: int | None = None,
                 serial_intake: bool = False,
                 ) -> tuple[list[Request], ReplicaEngine, float, float | None]:
    """One seed of :func:`replay` on one engine: the finished requests, the engine, the end
    of the client's final sleep and (``prefix_runs_before`` given) the prompts' share found in
    the prefix cache (arguments as :func:`replay`'s)."""
    if arrival_seed is not None:
        arr, end_min = vllm_arrivals(num_prompts, rate, burstiness, arrival_seed)
    else:
        rng = np.random.default_rng([seed, 0x5EED])
        arr = benchmark_arrivals(num_prompts, rate, burstiness, rng)
        end_min = float(arr[-1] + gamma_gaps(1, rate, burstiness, rng)[0])
    if request_lengths is not None:
        ins, outs = _known_lengths(request_lengths, num_prompts, params.max_model_len)
    else:
        ins, outs = sample_lengths(lengths, num_prompts, seed, totals, pinned_outputs,
                                   params.max_model_len)
    cached = ins if warm_prefix_cache else None
    hit = None
    if prefix_runs_before is not None and not warm_prefix_cache:
        cap = (params.kv_capacity_tokens if prefix_capacity_tokens is None
               else prefix_capacity_tokens)
        cached = cached_prompt_tokens(ins, outs, cap, params.block_size, prefix_runs_before)
        hit = hit_share(ins, cached)
    reqs, engine = simulate_requests(params, arr, ins, outs, cached=cached,
                                     max_concurrency=max_concurrency,
                                     serial_intake=serial_intake)
    return reqs, engine, end_min, hit


def _replay_one(params: ReplicaParams, *, rate: float, num_prompts: int, burstiness: float,
                max_concurrency: int | None, lengths: LengthModel, seeds: Sequence[int],
                arrival_seed: int | None, totals: tuple[int, int] | None,
                warm_prefix_cache: bool, pinned_outputs: Sequence[tuple[int, int]],
                prefix_runs_before: int | None, prefix_capacity_tokens: int | None,
                request_lengths: tuple[Sequence[int], Sequence[int]] | None,
                serial_intake: bool = False,
                ) -> tuple[dict[str, list[float]], float, Sequence[int]]:
    """:func:`replay`'s per-seed metrics on one engine, the mean preemptions and the seeds
    simulated."""
    if request_lengths is not None:  # checked once, before any seed runs
        _known_lengths(request_lengths, num_prompts, params.max_model_len)
    per_seed: dict[str, list[float]] = {k: [] for k in METRICS}
    pre = 0.0
    # recorded lengths and exact send times: every seed is the same run, simulated once
    simulated = (seeds[:1] if request_lengths is not None and arrival_seed is not None
                 else seeds)
    for seed in simulated:
        reqs, engine, end_min, hit = simulate_one(
            params, seed=seed, rate=rate, num_prompts=num_prompts, burstiness=burstiness,
            max_concurrency=max_concurrency, lengths=lengths, arrival_seed=arrival_seed,
            totals=totals, warm_prefix_cache=warm_prefix_cache,
            request_lengths=request_lengths, pinned_outputs=pinned_outputs,
            prefix_runs_before=prefix_runs_before,
            prefix_capacity_tokens=prefix_capacity_tokens, serial_intake=serial_intake)
        if hit is not None:
            per_seed.setdefault("prefix_hit_share", []).append(hit)
        m = run_metrics(reqs, engine, end_min)
        pre += engine.stats.preemptions / len(simulated)
        for k in METRICS:
            per_seed[k].append(m[k])
    return per_seed, pre, simulated


def replay(params: ReplicaParams, *, rate: float, num_prompts: int = 200,
           burstiness: float = 1.0, max_concurrency: int | None = None,
           lengths: LengthModel | None = None, seeds: Sequence[int] = (0, 1, 2, 3, 4),
           arrival_seed: int | None = None, totals: tuple[int, int] | None = None,
           warm_prefix_cache: bool = False,
           pinned_outputs: Sequence[tuple[int, int]] = (),
           prefix_runs_before: int | None = None,
           prefix_capacity_tokens: int | None = None,
           request_lengths: tuple[Sequence[int], Sequence[int]] | None = None,
           serial_intake: bool = False) -> ReplayResult:
    """Replay vLLM's serving benchmark on the replica model, averaged over ``seeds``.

    ``seeds`` drive the request lengths (and the arrivals unless ``arrival_seed`` is given).
    ``arrival_seed``: reproduce ``benchmark_serving.py --seed arrival_seed``'s exact send times
    (the same for every length seed). ``totals``: condition each seed's lengths on a run's token
    totals. ``warm_prefix_cache``: the prompts' KV blocks are already cached when they arrive
    (vLLM V1 prefix caching after an earlier run of the same prompts); off by default.
    ``pinned_outputs``: (request index, output tokens) known for some requests
    (:func:`sample_lengths`). ``prefix_runs_before``: the run follows that many runs of the
    same requests on one server; each request's cached prompt tokens come from the LRU
    bookkeeping of :mod:`fleetplan.replica.prefix_cache` over them (instead of
    ``warm_prefix_cache``'s all-or-nothing), and ``prefix_hit_share`` joins the metrics;
    ``prefix_capacity_tokens``: the cache those runs shared (default the parameters' KV
    capacity). ``request_lengths``: the (prompt, reply) tokens of each request in send order,
    when the run recorded them (:mod:`fleetplan.profiles.request_lengths`): sent as they are
    instead of drawn (``lengths``, ``totals`` and ``pinned_outputs`` are then not used; a
    request longer than the parameters' context is cut to it); with ``arrival_seed`` every
    seed is then the same run, simulated once. ``serial_intake``: the server takes requests
    in one at a time, ``overhead_s`` each, and a burst reaches the scheduler when it has been
    taken in (:func:`intake_release`; not with ``max_concurrency``). A configuration of several
    engines
    (data-parallel replicas, pipeline micro-batches: ``8xH100-SXM+tp4pp2``) splits the run
    over them (:mod:`fleetplan.replica.split_replay`, which says what it does not use).
    """
    if num_prompts < 1:
        raise InputError(f"num_prompts(={num_prompts}) must be >= 1")
    if not seeds:
        raise InputError("seeds must not be empty")
    if max_concurrency is not None and max_concurrency < 1:
        raise InputError(f"max_concurrency(={max_concurrency}) must be >= 1")
    lm = lengths if lengths is not None else protocol_length_model()
    engines = params_engines(params)
    if engines > 1:  # data-parallel replicas / pipeline micro-batches: each engine its share
        per_seed, pre = replay_engines(
            params, engines, rate=rate, num_prompts=num_prompts, burstiness=burstiness,
            max_concurrency=max_concurrency, lengths=lm, seeds=seeds, arrival_seed=arrival_seed,
            totals=totals, warm_prefix_cache=warm_prefix_cache, request_lengths=request_lengths,
            simulate_one=partial(simulate_one, serial_intake=serial_intake),
            itl_stats=itl_stats, metrics=METRICS)
        simulated = seeds
    else:
        per_seed, pre, simulated = _replay_one(
            params, rate=rate, num_prompts=num_prompts, burstiness=burstiness,
            max_concurrency=max_concurrency, lengths=lm, seeds=seeds, arrival_seed=arrival_seed,
            totals=totals, warm_prefix_cache=warm_prefix_cache, pinned_outputs=pinned_outputs,
            prefix_runs_before=prefix_runs_before,
            prefix_capacity_tokens=prefix_capacity_tokens, request_lengths=request_lengths,
            serial_intake=serial_intake)
    if len(simulated) < len(seeds):
        per_seed = {k: vals * len(seeds) for k, vals in per_seed.items()}
    stats = {}
    for k, vals in per_seed.items():
        a = np.asarray(vals, dtype=float)
        stats[k] = MetricStat(float(a.mean()), float(a.std(ddof=1)) if a.size > 1 else 0.0,
                              tuple(float(v) for v in a))
    return ReplayResult(params.model, params.config, params.calibrated, float(rate), num_prompts,
                        float(burstiness), tuple(int(s) for s in seeds), arrival_seed, stats, pre)
