"""A fleet replication whose replicas fail and are replaced (a scenario's ``reliability:``).

:class:`ChurnRun` is a :class:`~fleetplan.fleet.world.FleetRun` with the bookkeeping failures
need, all set when it is built: which requests sit on each replica slot, which slots are up, each
slot's generation (a replaced engine's late completions are ignored) and down spans, and the
busy time of the engines a slot has lost. The failure processes that call :meth:`ChurnRun.fail`
and :meth:`ChurnRun.restore` are :mod:`fleetplan.fleet.churn`'s.

A failed replica's requests (queued or running) are re-sent at once, keeping their arrival time
(TTFT counts from the first send), to another replica of their pool that is up, else of any pool
the class may use; with none up the request is lost: it never gets a token and enters the
latency statistics censored at the run's end, so the P99s include the failure periods. A
replacement is a fresh replica (empty queue and cache) after ``replace_s``.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

import numpy as np
import simpy

from fleetplan.fleet.pools import PoolModel
from fleetplan.fleet.traffic import Traffic
from fleetplan.fleet.world import FleetRun, RoutingInputs
from fleetplan.replica.engine import Request
from fleetplan.replica.engine_group import Replica, make_engine

__all__ = ["ChurnRun"]


class ChurnRun(FleetRun):
    """One replication's world whose replicas fail and are replaced (module docstring)."""

    def __init__(self, pools: Sequence[PoolModel], traffic: Traffic, routing: RoutingInputs,
                 warmup_s: float, duration_s: float) -> None:
        super().__init__(pools, traffic, routing, warmup_s, duration_s)
        n = len(self.traffic)
        self.up = [True] * len(self.engines)
        self.gen = [0] * len(self.engines)
        self.on_slot: list[dict[int, None]] = [{} for _ in self.engines]  # ordered sets
        self.down_since: list[float | None] = [None] * len(self.engines)
        self.down_spans: list[list[tuple[float, float]]] = [[] for _ in self.engines]
        self.retried = np.zeros(n, dtype=bool)
        self.lost = np.zeros(n, dtype=bool)
        self.class_replicas = [[r for r, p in enumerate(self.replica_pool) if p in set(cp)]
                               for cp in routing.class_pools]
        self.dead_busy = [0.0] * len(self.engines)  # busy time of replaced engines, per slot
        self.dead_active = [0.0] * len(self.engines)  # their power activity (s), per slot
        # in place: the router's TTFT predictor reads this list
        self.engines[:] = [self._engine(r, self.pools[p]) for r, p in enumerate(self.replica_pool)]

    def _engine(self, slot: int, pm: PoolModel) -> Replica:
        """A replica for ``slot`` whose completions count only while it is the slot's own."""
        gen = self.gen[slot]

        def finished(req: Request) -> None:
            if self.gen[slot] == gen:
                self.on_slot[slot].pop(req.rid, None)
                self.on_finish(req)

        return make_engine(self.env, pm.params, finished, record_itl=False)

    def slot_busy(self, slot: int, t: float) -> float:
        """Engine time replica slot ``slot`` spent stepping up to ``t`` (its engines so far)."""
        if not self.up[slot]:
            return self.dead_busy[slot]
        return self.dead_busy[slot] + self.engines[slot].busy_s_at(t)

    def slot_active(self, slot: int, t: float) -> float:
        """Power activity (s: step time x the steps' share of the idle-to-TDP range) of replica
        slot ``slot`` up to ``t`` (its engines so far)."""
        if not self.up[slot]:
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

    def arrivals(self) -> Generator[simpy.Event, object, None]:
        """The traffic, each request placed at its arrival on a replica that is up."""
        env = self.env
        for i, t in enumerate(self.traffic.arrival_s.tolist()):
            if t > env.now:
                yield env.timeout(t - env.now)
            self._place(i)
        self.end_of_arrivals()

    def failures(self, measured: np.ndarray, w0: float, end: float
                 ) -> tuple[np.ndarray | None, np.ndarray | None, tuple[float, ...]]:
        return self.retried[measured], self.lost[measured], self._availability(w0, end)

    def _availability(self, w0: float, end: float) -> tuple[float, ...]:
        """Per pool, the share of its replica-time in ``[w0, end]`` that its replicas were up."""
        out = []
        span = max(end - w0, 1e-9)
        for p, pm in enumerate(self.pools):
            down = 0.0
            for r, q in enumerate(self.replica_pool):
                if q != p:
                    continue
                spans = list(self.down_spans[r])
                since = self.down_since[r]
                if since is not None:
                    spans.append((since, end))
                down += sum(max(0.0, min(b, end) - max(a, w0)) for a, b in spans)
            out.append(1.0 - down / (span * pm.count))
        return tuple(out)
