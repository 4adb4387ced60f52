"""One replication of a fleet: replica engines, a router and the traffic in one SimPy world.

Main entry: :func:`run_replication`. Requests arriving in ``[warmup_s, duration_s)`` are
measured; the run then drains them. A monitor watches each pool's backlog (requests routed and
not finished): a backlog past a hard cap stops the run at once, and a backlog that grew over
the measured window by more than normal fluctuation marks the pool overloaded; its completions
per second are then its sustainable rate. Requests without a first token when the run stops
enter the latency statistics as censored values (time waited so far: a lower bound).

Churn (``churn=``, from the scenario's ``reliability:`` block; :mod:`fleetplan.fleet.churn`):
a failed replica's requests (queued or running) are re-sent at once, keeping their arrival
time (TTFT counts from the first send), to another replica of their pool that is up, else of any
pool the class may use; with none up the request is lost: it never gets a token and enters the
latency statistics censored at the run's end, so the P99s include the failure periods. A
replacement is a fresh replica (empty queue and cache) after ``replace_s``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass

import numpy as np
import simpy

from fleetplan.fleet.pools import PoolModel, unloaded_ttft_s
from fleetplan.fleet.routing import Router, RoutingContext, RoutingPolicy, make_router
from fleetplan.fleet.traffic import Traffic
from fleetplan.replica.delivery import delivery_lags
from fleetplan.replica.engine import ReplicaEngine, Request
from fleetplan.scenario.reliability import PoolReliability

# A pool whose backlog exceeds this many requests per replica (times max_num_seqs) is
# overloaded beyond doubt: the run stops instead of simulating an ever-growing queue.
BACKLOG_CAP_SEQS = 4
# Growth of a pool's backlog over the measured window that marks it overloaded: more than this
# share of its measured requests and more than GROWTH_FLOOR per replica.
GROWTH_SHARE = 0.03
GROWTH_FLOOR = 32
# The drain after the last arrival may last at most this long (s, or this share of duration).
DRAIN_MIN_S, DRAIN_SHARE = 120.0, 0.5


@dataclass(frozen=True)
class RoutingInputs:
    """Fixed routing facts of a scenario (per class): pools allowed, split, SLO, P99 prompt."""

    policy: RoutingPolicy | str
    class_pools: Sequence[Sequence[int]]
    split: Sequence[Sequence[float] | None]
    slo_ttft_s: Sequence[float | None]
    p99_prompt: Sequence[int]
    mean_prompt: float


@dataclass(frozen=True)
class Replication:
    """Raw outcome of one replication (arrays over measured requests, in arrival order)."""

    cls: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    ttft_s: np.ndarray            # censored (time waited) where no first token came
    e2e_s: np.ndarray             # censored where not finished
    tpot_s: np.ndarray            # NaN where unfinished or one output token
    finished: np.ndarray          # bool
    pool: np.ndarray              # pool index per measured request
    window_s: float
    utilization: tuple[float, ...]
    # per pool: mean share of the idle-to-TDP power range its replicas drew over the window
    # (engine steps' activity, ReplicaEngine.active_s_at; fleetplan.replica.power)
    power_activity: tuple[float, ...]
    pool_overloaded: tuple[bool, ...]
    pool_completed_rps: tuple[float, ...]
    stopped_at_s: float
    stop_reason: str
    # churn (all empty / None without it)
    retried: np.ndarray | None = None     # bool per measured request: re-sent after a failure
    lost: np.ndarray | None = None        # bool per measured request: no replica up to take it
    availability: tuple[float, ...] = ()  # per pool: share of replica-time up in the window


def _predictor(engines: Sequence[ReplicaEngine], mean_prompt: float) -> Callable[[int, int], float]:
    """TTFT a new request would see on replica ``r``: overhead plus the prefill of the queue
    ahead (mean prompt each) and its own prompt, in chunks beside the running decodes."""
    def predict(r: int, input_tokens: int) -> float:
        e = engines[r]
        p = e.params
        running = e.running
        per_step = max(1, p.max_num_batched_tokens - running)
        tokens = e.queue_len * mean_prompt + input_tokens
        steps = math.ceil(tokens / per_step)
        chunk = int(min(tokens, per_step))
        wait = 0.0
        if running >= p.max_num_seqs:  # a slot must free first: about one decode lifetime
            wait = p.step_s(0, running, e.kv_tokens_used) * 32
        return (p.overhead_s + wait + steps * p.step_s(chunk, running, e.kv_tokens_used)
                + p.c_deliver * (running + 1))  # the host's lag (fleetplan.replica.delivery)

    return predict


def run_replication(pools: Sequence[PoolModel], traffic: Traffic, routing: RoutingInputs, *,
                    warmup_s: float, duration_s: float,
                    progress: Callable[[float], None] | None = None,
                    churn: Sequence[PoolReliability | None] | None = None,
                    churn_seed: np.random.SeedSequence | None = None) -> Replication:
    """Simulate ``traffic`` on ``pools`` with the routing policy; see the module docstring.
    ``churn``: per pool its failure model (``None``: never fails) and ``churn_seed`` the
    replication's churn stream."""
    run = _Run(pools, traffic, routing, warmup_s, duration_s)
    if churn is not None and any(c is not None and c.active for c in churn):
        from fleetplan.fleet.churn import start_churn

        run.enable_churn(routing)
        start_churn(run, run.replica_pool, churn, churn_seed or np.random.SeedSequence(0))
    return _outcome(_run_to_stop(run, progress))


def _run_to_stop(run: _Run, progress: Callable[[float], None] | None = None) -> _Run:
    env = run.env
    env.process(run.arrivals())
    env.process(run.monitor(progress))
    env.run(until=run.stop)
    return run


class _Run:
    """One replication's world: the engines, the router and what each request went through."""

    def __init__(self, pools: Sequence[PoolModel], traffic: Traffic, routing: RoutingInputs,
                 warmup_s: float, duration_s: float,
                 own: Sequence[int] | None = None) -> None:
        self.env = env = simpy.Environment()
        # a part (fleetplan.fleet.parts): only the pools in ``own`` get their requests; every
        # request is still routed (the router's state), and one routed elsewhere counts as done
        mine = None if own is None else set(own)
        self.own = [mine is None or p in mine for p in range(len(pools))]
        self.pools = pools
        self.traffic = traffic
        self.warmup_s = warmup_s
        self.duration_s = duration_s
        n = len(traffic)
        t_arr = traffic.arrival_s
        # per request, as Python lists (read and written once per event; arrays at the end)
        self.first = [math.nan] * n
        self.fin = [math.nan] * n
        self.routed_to = [-1] * n
        self.measured = (t_arr >= warmup_s) & (t_arr < duration_s)
        self.is_measured = self.measured.tolist()
        self.left = int(self.measured.sum())  # measured requests not finished
        self.stop = env.event()
        self.arrivals_done = False
        self.reason = "drained"
        self.backlog = [0] * len(pools)
        self.rep_of = [0] * n
        self.done = [0] * len(pools)  # completions per pool since t=0
        self.engines: list[ReplicaEngine] = []
        self.replica_pool: list[int] = []
        for pm in pools:
            for _ in range(pm.count):
                self.engines.append(ReplicaEngine(env, pm.params, self.on_finish,
                                                  record_itl=False))
                self.replica_pool.append(pm.index)
        # outstanding requests per replica (routed, not finished)
        self.busy_count = [0] * len(self.engines)
        self.router = self._router(routing)
        self.caps = [pm.count * pm.params.max_num_seqs * BACKLOG_CAP_SEQS for pm in pools]
        self.snap: dict[str, list[float]] = {}
        self.churn = False
        self.dead_busy = [0.0] * len(self.engines)  # busy time of replaced engines, per slot
        self.dead_active = [0.0] * len(self.engines)  # their power activity (s), per slot

    def enable_churn(self, routing: RoutingInputs) -> None:
        """Bookkeeping that failures need: which requests sit on each replica, who is up."""
        n = len(self.traffic)
        self.churn = True
        self.up = [True] * len(self.engines)
        self.gen = [0] * len(self.engines)
        self.on_slot: list[dict[int, None]] = [{} for _ in self.engines]  # ordered sets
        self.down_since: list[float | None] = [None] * len(self.engines)
        self.down_spans: list[list[tuple[float, float]]] = [[] for _ in self.engines]
        self.retried = np.zeros(n, dtype=bool)
        self.lost = np.zeros(n, dtype=bool)
        self.class_replicas = [[r for r, p in enumerate(self.replica_pool) if p in set(cp)]
                               for cp in routing.class_pools]
        # in place: the router's TTFT predictor reads this list
        self.engines[:] = [self._engine(r, self.pools[p]) for r, p in enumerate(self.replica_pool)]

    def _engine(self, slot: int, pm: PoolModel) -> ReplicaEngine:
        """A replica for ``slot`` whose completions count only while it is the slot's own."""
        gen = self.gen[slot]

        def finished(req: Request) -> None:
            if self.gen[slot] == gen:
                self.on_slot[slot].pop(req.rid, None)
                self.on_finish(req)

        return ReplicaEngine(self.env, pm.params, finished, record_itl=False)

    def slot_busy(self, slot: int, t: float) -> float:
        """Engine time replica slot ``slot`` spent stepping up to ``t`` (its engines so far)."""
        if self.churn and not self.up[slot]:
            return self.dead_busy[slot]
        return self.dead_busy[slot] + self.engines[slot].busy_s_at(t)

    def slot_active(self, slot: int, t: float) -> float:
        """Power activity (s: step time x the steps' share of the idle-to-TDP range) of replica
        slot ``slot`` up to ``t`` (its engines so far)."""
        if self.churn and not self.up[slot]:
            return self.dead_active[slot]
        return self.dead_active[slot] + self.engines[slot].active_s_at(t)

    def fail(self, slot: int) -> None:
        """Replica ``slot`` goes down now: its requests are re-sent (or lost)."""
        if not self.up[slot]:
            return
        now = self.env.now
        self.dead_busy[slot] += self.engines[slot].busy_s_at(now)
        self.dead_active[slot] += self.engines[slot].active_s_at(now)
        self.up[slot] = False
        self.gen[slot] += 1
        self.down_since[slot] = now
        moved = list(self.on_slot[slot])
        self.on_slot[slot] = {}
        p = self.replica_pool[slot]
        self.backlog[p] -= len(moved)
        self.busy_count[slot] -= len(moved)
        for i in moved:
            self.retried[i] = True
            self.routed_to[i] = -1
            self._place(i, retry=True)

    def restore(self, slot: int) -> None:
        """A fresh replica takes slot ``slot``'s place now."""
        if self.up[slot]:
            return
        now = self.env.now
        since = self.down_since[slot]
        self.down_spans[slot].append((since if since is not None else now, now))
        self.down_since[slot] = None
        self.engines[slot] = self._engine(slot, self.pools[self.replica_pool[slot]])
        self.up[slot] = True

    def _fallback(self, c: int, r: int) -> int:
        """An up replica instead of the down ``r``: its pool's least loaded, else the class's;
        -1 when none is up."""
        up, busy = self.up, self.busy_count
        p = self.replica_pool[r]
        same = [x for x in self.router.ctx.pool_replicas[p] if up[x]]
        cands = same or [x for x in self.class_replicas[c] if up[x]]
        return min(cands, key=busy.__getitem__) if cands else -1

    def _place(self, i: int, *, retry: bool = False) -> None:
        """Route request ``i`` now and submit it (churn runs); lost when no replica is up."""
        tr = self.traffic
        c = int(tr.cls[i])
        a = int(tr.input_tokens[i])
        k = int(tr.cached_tokens[i]) if tr.cached_tokens is not None else 0
        if retry:
            k = 0  # the new replica's prefix cache does not hold it
        r = self.router.route(c, a - min(k, a - 1) if k else a)
        chosen = r
        if not self.up[r]:
            r = self._fallback(c, r)
        if r < 0:  # counted against the pool the router chose (no backlog: it never queues)
            self.lost[i] = True
            self.routed_to[i] = self.replica_pool[chosen]
            if self.is_measured[i]:
                self.left -= 1
                if self.left == 0 and self.arrivals_done and not self.stop.triggered:
                    self.stop.succeed()
            return
        p = self.replica_pool[r]
        self.routed_to[i] = p
        self.backlog[p] += 1
        self.busy_count[r] += 1
        self.rep_of[i] = r
        self.on_slot[r][i] = None
        self.engines[r].submit(Request(i, float(tr.arrival_s[i]), a, int(tr.output_tokens[i]), c,
                                       cached_tokens=k))

    def _router(self, routing: RoutingInputs) -> Router:
        replica_pool, pools = self.replica_pool, self.pools
        eligible = [[r for r, p in enumerate(replica_pool) if p in set(cp)]
                    for cp in routing.class_pools]
        unloaded = [[unloaded_ttft_s(pm.params, routing.p99_prompt[c]) for pm in pools]
                    for c in range(len(routing.class_pools))]
        ctx = RoutingContext(
            replica_pool=replica_pool, eligible=eligible,
            outstanding=self.busy_count,
            split=routing.split, slo_ttft_s=routing.slo_ttft_s, unloaded_ttft_s=unloaded,
            predict_ttft_s=_predictor(self.engines, routing.mean_prompt))
        return make_router(routing.policy, ctx)

    def on_finish(self, req: Request) -> None:
        i = req.rid
        self.first[i] = req.first_token_s
        self.fin[i] = req.finish_s
        p = self.routed_to[i]
        self.backlog[p] -= 1
        self.busy_count[self.rep_of[i]] -= 1
        if self.env.now < self.duration_s:
            self.done[p] += 1
        if self.is_measured[i]:
            self.left -= 1
            if self.left == 0 and self.arrivals_done and not self.stop.triggered:
                self.stop.succeed()

    def arrivals(self) -> Generator[simpy.Event, object, None]:
        """The traffic, routed and submitted at each request's arrival."""
        env, tr = self.env, self.traffic
        # plain Python floats and ints, one conversion for the whole run
        t_arr, ins, outs, cls_of = (tr.arrival_s.tolist(), tr.input_tokens.tolist(),
                                    tr.output_tokens.tolist(), tr.cls.tolist())
        cached = tr.cached_tokens.tolist() if tr.cached_tokens is not None else None
        route, replica_pool, engines = self.router.route, self.replica_pool, self.engines
        routed_to, backlog, busy_count, rep_of = (self.routed_to, self.backlog,
                                                  self.busy_count, self.rep_of)
        own, measured = self.own, self.is_measured
        for i in range(len(tr)):
            t = t_arr[i]
            if t > env.now:
                yield env.timeout(t - env.now)
            if self.churn:
                self._place(i)
                continue
            c = cls_of[i]
            a = ins[i]
            k = cached[i] if cached is not None else 0
            r = route(c, a - min(k, a - 1) if k else a)  # tokens it must prefill
            p = replica_pool[r]
            routed_to[i] = p
            if not own[p]:  # another part's pool simulates it
                if measured[i]:
                    self.left -= 1
                continue
            backlog[p] += 1
            busy_count[r] += 1
            rep_of[i] = r
            engines[r].submit(Request(i, t, a, outs[i], c, cached_tokens=k))
        self.arrivals_done = True
        if self.left == 0 and not self.stop.triggered:
            self.stop.succeed()

    def monitor(self, progress: Callable[[float], None] | None
                ) -> Generator[simpy.Event, object, None]:
        """Snapshots at the window's ends; stops the run at the backlog cap or drain limit."""
        env, snap, backlog, engines = self.env, self.snap, self.backlog, self.engines
        warmup_s, duration_s = self.warmup_s, self.duration_s
        check_s = max(0.5, (duration_s - warmup_s) / 100.0)
        drain_end = duration_s + max(DRAIN_MIN_S, DRAIN_SHARE * duration_s)
        took_warm = took_end = False
        while not self.stop.triggered:
            now = env.now
            if not took_warm and now >= warmup_s:
                snap["busy0"] = [self.slot_busy(r, warmup_s) for r in range(len(engines))]
                snap["act0"] = [self.slot_active(r, warmup_s) for r in range(len(engines))]
                snap["backlog0"] = list(backlog)
                snap["done0"] = list(self.done)
                took_warm = True
            if not took_end and now >= duration_s:
                snap["busy1"] = [self.slot_busy(r, duration_s) for r in range(len(engines))]
                snap["act1"] = [self.slot_active(r, duration_s) for r in range(len(engines))]
                snap["backlog1"] = list(backlog)
                took_end = True
            if any(b > cap for b, cap in zip(backlog, self.caps, strict=True)):
                self.reason = "backlog cap"
                self.stop.succeed()
                return
            if now >= drain_end:
                self.reason = "drain limit"
                self.stop.succeed()
                return
            if progress is not None:
                progress(min(1.0, now / duration_s))
            nxt = min(x for x in (now + check_s, warmup_s, duration_s, drain_end) if x > now)
            yield env.timeout(nxt - now)


def _delivered(run: _Run, first: np.ndarray, fin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The times the client receives each finished request's first and last token: the
    engine's plus the host's lag on the replica slot that served it
    (:mod:`fleetplan.replica.delivery`; requests still running at the stop have no recorded
    first token, so they are not counted among a step's decoders)."""
    c = np.array([pm.params.c_deliver for pm in run.pools], dtype=float)
    if not (c > 0).any():
        return first, fin
    slot = np.asarray(run.rep_of, dtype=np.int64)
    pool_of_slot = np.asarray(run.replica_pool, dtype=np.int64)
    lag_first, lag_last = np.zeros(first.size), np.zeros(first.size)
    for p in np.flatnonzero(c > 0):
        mine = pool_of_slot[slot] == p
        lag_first[mine], lag_last[mine] = delivery_lags(first[mine], fin[mine], float(c[p]),
                                                        replica=slot[mine])
    return first + lag_first, fin + lag_last


def _outcome(run: _Run, now: float | None = None) -> Replication:
    """The measured requests' latencies (censored at the stop, ``now``: default the run's
    clock) and each pool's statistics."""
    pools, snap, warmup_s, duration_s = run.pools, run.snap, run.warmup_s, run.duration_s
    t_arr, outs = run.traffic.arrival_s, run.traffic.output_tokens
    now = run.env.now if now is None else now
    end = min(now, duration_s)
    w0 = warmup_s
    measured = run.measured
    if "busy0" not in snap or end - warmup_s < max(1.0, 0.1 * (duration_s - warmup_s)):
        # stopped (overloaded) during or just after warm-up: measure from t=0
        w0 = 0.0
        snap["busy0"] = [0.0] * len(run.engines)
        snap["act0"] = [0.0] * len(run.engines)
        snap["backlog0"] = [0] * len(pools)
        snap["done0"] = [0] * len(pools)
        measured = (t_arr < end)
    if "busy1" not in snap:
        snap["busy1"] = [run.slot_busy(r, end) for r in range(len(run.engines))]
        snap["act1"] = [run.slot_active(r, end) for r in range(len(run.engines))]
        snap["backlog1"] = list(run.backlog)
    window = max(end - w0, 1e-9)
    routed_to = np.asarray(run.routed_to, dtype=np.int64)
    first, fin = np.asarray(run.first, dtype=float), np.asarray(run.fin, dtype=float)
    first, fin = _delivered(run, first, fin)
    m = measured & (routed_to >= 0)
    # censor: no first token / not finished by the stop
    ft = np.where(np.isnan(first), now, first)
    fe = np.where(np.isnan(fin), now, fin)
    o = outs.astype(float)
    tpot = np.where((~np.isnan(fin)) & (o > 1), (fin - first) / np.maximum(o - 1, 1), np.nan)
    return Replication(
        cls=run.traffic.cls[m], input_tokens=run.traffic.input_tokens[m], output_tokens=outs[m],
        ttft_s=(ft - t_arr)[m], e2e_s=(fe - t_arr)[m], tpot_s=tpot[m],
        finished=~np.isnan(fin[m]), pool=routed_to[m], window_s=window,
        utilization=_per_pool(run, window, "busy"),
        power_activity=_per_pool(run, window, "act"),
        pool_overloaded=_overloaded(run, routed_to[m]),
        pool_completed_rps=tuple((d - d0) / window for d, d0 in zip(run.done, snap["done0"],
                                                                     strict=True)),
        stopped_at_s=now, stop_reason=run.reason,
        retried=run.retried[m] if run.churn else None,
        lost=run.lost[m] if run.churn else None,
        availability=_availability(run, w0, end) if run.churn else (),
    )


def _availability(run: _Run, w0: float, end: float) -> tuple[float, ...]:
    """Per pool, the share of its replica-time in ``[w0, end]`` that its replicas were up."""
    out = []
    span = max(end - w0, 1e-9)
    for p, pm in enumerate(run.pools):
        down = 0.0
        for r, q in enumerate(run.replica_pool):
            if q != p:
                continue
            spans = list(run.down_spans[r])
            since = run.down_since[r]
            if since is not None:
                spans.append((since, end))
            down += sum(max(0.0, min(b, end) - max(a, w0)) for a, b in spans)
        out.append(1.0 - down / (span * pm.count))
    return tuple(out)


def _per_pool(run: _Run, window: float, what: str) -> tuple[float, ...]:
    """Per pool, the share of the window its replicas spent stepping (``what`` ``busy``: the
    utilization) or their power activity per replica-second (``act``), within [0, 1]."""
    snap = run.snap
    start, stop = snap[f"{what}0"], snap[f"{what}1"]
    out = []
    r0 = 0
    for pm in run.pools:
        b = sum(stop[r] - start[r] for r in range(r0, r0 + pm.count))
        out.append(min(1.0, max(0.0, b / (window * pm.count))))
        r0 += pm.count
    return tuple(out)


def _overloaded(run: _Run, pools_of: np.ndarray) -> tuple[bool, ...]:
    """Per pool: its backlog grew past normal fluctuation, or it was why the run stopped
    (``pools_of``: the pool of each measured request that was routed)."""
    snap, backlog, reason = run.snap, run.backlog, run.reason
    routed = np.bincount(pools_of, minlength=len(run.pools))
    over = []
    for p, pm in enumerate(run.pools):
        grew = snap["backlog1"][p] - snap["backlog0"][p]
        limit = max(GROWTH_SHARE * routed[p], GROWTH_FLOOR * pm.count)
        over.append(grew > limit or (reason == "backlog cap" and backlog[p] > run.caps[p])
                    or (reason == "drain limit" and backlog[p] > 0))
    return tuple(bool(x) for x in over)
