"""A replica of several engines in the fleet simulator: the data-parallel ranks of a server, or
the micro-batch engines of a pipeline-parallel replica (``8xRTX-4090+tp4pp2``).

A configuration laid out as ``dp`` replicas of ``pp`` pipeline stages serves as ``dp x pp``
identical engines (:func:`fleetplan.replica.split_replay.params_engines`), each with the
parameters :func:`fleetplan.replica.priors.prior_params` gives one of them (its step runs
every stage; it holds ``1 / pp`` of the replica's KV cache and ``max_num_seqs``). A benchmark
run is replayed on them by :mod:`fleetplan.replica.split_replay` and a steady state by
:func:`fleetplan.replica.steady.steady_state`, each splitting the load evenly; in the fleet
simulator a plan's replica is an :class:`EngineGroup` of those engines, and each request it is
sent goes to the engine with the fewest outstanding requests (ties in turn), as vLLM's
data-parallel balancer and its pipeline scheduler's virtual engines place new requests.

The group answers the fleet as one replica: its outstanding requests are all its engines'; its
busy and power-activity time are the engines' mean, so that a pool's GPUs (``gpu_count`` per
replica) are charged as busy as its engines are on average (a data-parallel rank runs on its
own ``1 / dp`` of the GPUs; a pipeline stage's GPUs carry each of the ``pp`` micro-batch
engines' steps for ``1 / pp`` of its time). The figures a router's first-token estimate reads
(``queue_len``, ``running``, ``kv_tokens_used``) are those of the engine the next request would
go to. A replica that fails (:mod:`fleetplan.fleet.failover`) loses every engine of it at once.

Main entry: :func:`make_engine` (a :class:`~fleetplan.replica.engine.ReplicaEngine`, or an
:class:`EngineGroup` where the configuration has more than one engine).
"""

from __future__ import annotations

from collections.abc import Callable

import simpy

from fleetplan.replica.engine import ReplicaEngine, Request
from fleetplan.replica.params_record import ReplicaParams
from fleetplan.replica.split_replay import params_engines


class EngineGroup:
    """``engines`` identical engines of one replica (module docstring)."""

    def __init__(self, env: simpy.Environment, params: ReplicaParams,
                 on_finish: Callable[[Request], None] | None, *, record_itl: bool,
                 engines: int) -> None:
        if engines < 2:
            raise ValueError(f"an engine group has at least 2 engines, not {engines}")
        self.params = params
        self.members = [ReplicaEngine(env, params, on_finish, record_itl=record_itl)
                        for _ in range(engines)]
        self._turn = 0  # where the search for the least-loaded engine starts (fair ties)

    def _next(self) -> int:
        """The engine the next request goes to: the fewest outstanding, from ``_turn`` on."""
        k = len(self.members)
        best, least = self._turn, None
        for j in range(k):
            i = (self._turn + j) % k
            n = self.members[i].outstanding
            if least is None or n < least:
                best, least = i, n
        return best

    def submit(self, req: Request, at: float | None = None) -> None:
        i = self._next()
        self._turn = (i + 1) % len(self.members)
        self.members[i].submit(req, at)

    @property
    def outstanding(self) -> int:
        return sum(m.outstanding for m in self.members)

    @property
    def busy_s(self) -> float:
        return sum(m.busy_s for m in self.members) / len(self.members)

    def busy_s_at(self, now: float) -> float:
        return sum(m.busy_s_at(now) for m in self.members) / len(self.members)

    def active_s_at(self, now: float) -> float:
        return sum(m.active_s_at(now) for m in self.members) / len(self.members)

    @property
    def queue_len(self) -> int:
        return self.members[self._next()].queue_len

    @property
    def running(self) -> int:
        return self.members[self._next()].running

    @property
    def kv_tokens_used(self) -> int:
        return self.members[self._next()].kv_tokens_used


def make_engine(env: simpy.Environment, params: ReplicaParams,
                on_finish: Callable[[Request], None] | None = None, *,
                record_itl: bool = True) -> ReplicaEngine | EngineGroup:
    """One replica of ``params.config`` in ``env``: a single engine, or a group of its
    :func:`~fleetplan.replica.split_replay.params_engines` engines."""
    k = params_engines(params)
    if k > 1:
        return EngineGroup(env, params, on_finish, record_itl=record_itl, engines=k)
    return ReplicaEngine(env, params, on_finish, record_itl=record_itl)


# what the fleet simulator holds per replica slot
Replica = ReplicaEngine | EngineGroup
