"""The world of one fleet replication: replica engines, a router and the traffic in one SimPy
environment, and the monitor that stops it.

:class:`FleetRun` holds what each request went through (routed to, first token, finish) and each
pool's backlog; :func:`run_to_stop` runs it. Requests arriving in ``[warmup_s, duration_s)`` are
measured; the run then drains them. The monitor watches each pool's backlog (requests routed and
not finished): past a hard cap (:data:`BACKLOG_CAP_SEQS`) the run stops at once, and the drain
after the window lasts at most :data:`DRAIN_MIN_S` / :data:`DRAIN_SHARE`. What the run
measured is read by :mod:`fleetplan.fleet.outcome`; a run whose replicas fail is
:class:`fleetplan.fleet.failover.ChurnRun`; the entry is
:func:`fleetplan.fleet.sim.run_replication`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import simpy

from fleetplan.fleet.pools import PoolModel, unloaded_ttft_s
from fleetplan.fleet.routing import Router, RoutingContext, RoutingPolicy, make_router
from fleetplan.fleet.traffic import Traffic
from fleetplan.replica.engine import Request
from fleetplan.replica.engine_group import Replica, make_engine
from fleetplan.replica.split_replay import params_engines

__all__ = ["BACKLOG_CAP_SEQS", "DRAIN_MIN_S", "DRAIN_SHARE", "FleetRun", "RoutingInputs",
           "run_to_stop"]

# A pool whose backlog exceeds this many requests per replica (times max_num_seqs) is
# overloaded beyond doubt: the run stops instead of simulating an ever-growing queue.
BACKLOG_CAP_SEQS = 4
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


def _predictor(engines: Sequence[Replica], mean_prompt: float) -> Callable[[int, int], float]:
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
                + p.c_deliver * (running + 1)  # the host's lag (fleetplan.replica.delivery)
                + p.first_token_delay_s)  # and the stream delay's median

    return predict


class FleetRun:
    """One replication's world: the engines, the router and what each request went through
    (its replicas never fail: :class:`fleetplan.fleet.failover.ChurnRun` is one whose do)."""

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
        self.engines: list[Replica] = []
        self.replica_pool: list[int] = []
        for pm in pools:
            for _ in range(pm.count):
                self.engines.append(make_engine(env, pm.params, self.on_finish,
                                                record_itl=False))
                self.replica_pool.append(pm.index)
        # outstanding requests per replica (routed, not finished)
        self.busy_count = [0] * len(self.engines)
        self.router = self._router(routing)
        self.caps = [pm.count * params_engines(pm.params) * pm.params.max_num_seqs
                     * BACKLOG_CAP_SEQS for pm in pools]
        self.snap: dict[str, list[float]] = {}

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
        self.end_of_arrivals()

    def end_of_arrivals(self) -> None:
        """The last request has arrived: the run stops once the measured ones are done."""
        self.arrivals_done = True
        if self.left == 0 and not self.stop.triggered:
            self.stop.succeed()

    def slot_busy(self, slot: int, t: float) -> float:
        """Engine time replica slot ``slot`` spent stepping up to ``t``."""
        return self.engines[slot].busy_s_at(t)

    def slot_active(self, slot: int, t: float) -> float:
        """Power activity (s: step time x the steps' share of the idle-to-TDP range) of replica
        slot ``slot`` up to ``t``."""
        return self.engines[slot].active_s_at(t)

    def failures(self, measured: np.ndarray, w0: float, end: float
                 ) -> tuple[np.ndarray | None, np.ndarray | None, tuple[float, ...]]:
        """(retried, lost) per ``measured`` request and each pool's availability over
        ``[w0, end]``: none in a run whose replicas never fail."""
        return None, None, ()

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


R = TypeVar("R", bound=FleetRun)


def run_to_stop(run: R, progress: Callable[[float], None] | None = None) -> R:
    """Run ``run``'s world until it stops (drained, or the monitor's backlog or drain limit)."""
    env = run.env
    env.process(run.arrivals())
    env.process(run.monitor(progress))
    env.run(until=run.stop)
    return run
