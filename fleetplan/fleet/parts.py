"""A replication simulated in parts, pools apart, and merged into the same result.

Under a router whose pool choice never reads the fleet's state and whose replica choice reads
only the chosen pool's replicas (``Router.pools_apart``: ``planned``, ``round-robin``), each
pool receives the same requests at the same instants whatever the other pools do, and its
replicas' events depend on nothing else. A replication can then run as *parts*, each a set of
pools (:func:`split_pools`): every part routes every request, so the router's own state is
the same as in the whole run, and simulates only those routed to its pools (one routed to
another part's pool counts as done there). :func:`merge_parts` takes each request's first token
and finish, and each pool's window statistics, from the part that holds its pool, and builds the
replication the whole run would have built.

The merge is exact when every part drained its measured requests after the window's end, the
normal case; a part that stopped otherwise (the backlog cap or the drain limit of an overloaded
fleet) or drained before the window ended gives ``None``, and the caller runs that replication
whole. Why parts: a plan is checked with 3 replications, which on 2 workers leave one idle for a
third of the time; 3 replications in 2 parts each keep both busy
(:func:`fleetplan.fleet.simulate.simulate` with an executor).

Main entries: :func:`split_pools`, :func:`run_part`, :func:`merge_parts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fleetplan.fleet.outcome import Replication, outcome
from fleetplan.fleet.pools import PoolModel
from fleetplan.fleet.traffic import Traffic
from fleetplan.fleet.world import FleetRun, RoutingInputs, run_to_stop

# what a part's window snapshots hold per replica (the rest of ``FleetRun.snap`` is per pool)
_PER_REPLICA = ("busy0", "act0", "busy1", "act1")
_PER_POOL = ("backlog0", "backlog1", "done0")
# output tokens that cost a pool's simulation about as much as one request (measured on the
# optimizer benchmark's plan: a pool's time ~ 8 us a request + 24 ns an output token)
TOKENS_PER_REQUEST = 330.0


@dataclass(frozen=True)
class PartRun:
    """What one part (the pools in ``own``) of a replication found."""

    own: tuple[int, ...]
    mergeable: bool         # drained its measured requests after the window's end
    stopped_at_s: float
    stop_reason: str        # as Replication.stop_reason
    routed_to: np.ndarray   # every request's pool (the same in every part)
    index: np.ndarray       # the requests routed to its pools
    first: np.ndarray       # their first-token times (NaN: none)
    fin: np.ndarray         # their finish times (NaN: not finished)
    replica: np.ndarray     # the replica slot that served each of them (the host's lag)
    snap: dict[str, list[Any]]
    done: tuple[int, ...]   # completions per pool within the window's end (its pools')
    backlog: tuple[int, ...]


def split_pools(pools: Sequence[PoolModel], traffic: Traffic, routing: RoutingInputs,
                parts: int) -> list[tuple[int, ...]]:
    """The pools in at most ``parts`` groups of about equal simulation work, the largest
    first (longest-processing-time: each pool, heaviest first, to the lightest group). A pool's
    work is its expected share (the class's split when it has one, else its replicas among the
    class's pools') of each class's requests plus its output tokens / :data:`TOKENS_PER_REQUEST`
    (decode steps cost events too); pools without requests join the first group. Fewer groups
    when there are fewer pools with work. The grouping decides only how long the parts take,
    never what they compute."""
    n = len(routing.class_pools)
    per_class = (np.bincount(traffic.cls, minlength=n).astype(float)
                 + np.bincount(traffic.cls, weights=traffic.output_tokens.astype(float),
                               minlength=n) / TOKENS_PER_REQUEST)
    work = [0.0] * len(pools)
    for c, allowed in enumerate(routing.class_pools):
        split = routing.split[c] if c < len(routing.split) else None
        weights = ([split[p] if p < len(split) else 0.0 for p in allowed] if split is not None
                   else [float(pools[p].count) for p in allowed])
        total = sum(weights)
        if total > 0:
            for p, w in zip(allowed, weights, strict=True):
                work[p] += per_class[c] * w / total
    busy = sorted((p for p in range(len(pools)) if work[p] > 0), key=lambda p: (-work[p], p))
    groups: list[list[int]] = [[] for _ in range(max(1, min(parts, len(busy))))]
    load = [0.0] * len(groups)
    for p in busy:
        g = min(range(len(groups)), key=lambda i: (load[i], i))
        groups[g].append(p)
        load[g] += work[p]
    groups[0].extend(p for p in range(len(pools)) if work[p] <= 0)
    order = sorted(range(len(groups)), key=lambda i: (-load[i], i))
    return [tuple(sorted(groups[i])) for i in order if groups[i]]


def run_part(pools: Sequence[PoolModel], traffic: Traffic, routing: RoutingInputs,
             own: Sequence[int], *, warmup_s: float, duration_s: float) -> PartRun:
    """Simulate the part of a replication that holds the pools ``own`` (no churn: a failed
    replica's requests may move to another pool)."""
    run = run_to_stop(FleetRun(pools, traffic, routing, warmup_s, duration_s, own=own))
    routed = np.asarray(run.routed_to, dtype=np.int64)
    index = np.flatnonzero((routed >= 0) & np.asarray(run.own)[np.maximum(routed, 0)])
    snap = run.snap
    mergeable = (run.reason == "drained" and all(k in snap for k in _PER_REPLICA)
                 and run.env.now >= duration_s)
    return PartRun(
        own=tuple(sorted(own)), mergeable=mergeable, stopped_at_s=float(run.env.now),
        stop_reason=run.reason,
        routed_to=routed, index=index,
        first=np.asarray(run.first, dtype=float)[index],
        fin=np.asarray(run.fin, dtype=float)[index],
        replica=np.asarray(run.rep_of, dtype=np.int64)[index],
        snap={k: list(v) for k, v in snap.items()}, done=tuple(run.done),
        backlog=tuple(run.backlog))


def run_part_job(job: tuple[Any, ...]) -> PartRun:
    """:func:`run_part` of ``(pools, traffic, routing, own, warmup_s, duration_s)`` (executor
    entry: top level, picklable)."""
    pools, traffic, routing, own, warmup_s, duration_s = job
    return run_part(pools, traffic, routing, own, warmup_s=warmup_s, duration_s=duration_s)


def merge_parts(pools: Sequence[PoolModel], traffic: Traffic, routing: RoutingInputs,
                parts: Sequence[PartRun], *, warmup_s: float,
                duration_s: float) -> Replication | None:
    """The replication the parts (each pool in exactly one) make together, equal to the whole
    run's; ``None`` when a part cannot be merged (module docstring)."""
    owner = {}
    for j, part in enumerate(parts):
        for p in part.own:
            if p in owner:
                raise ValueError(f"pool #{p} is in two parts")
            owner[p] = j
    if sorted(owner) != list(range(len(pools))):
        raise ValueError("the parts do not hold every pool exactly once")
    if not all(part.mergeable for part in parts):
        return None
    routed = parts[0].routed_to
    if any(not np.array_equal(part.routed_to, routed) for part in parts[1:]):
        raise ValueError("the parts routed the requests differently: the router reads the "
                         "fleet's state (it is not pools_apart)")
    run = FleetRun(pools, traffic, routing, warmup_s, duration_s)
    first = np.full(len(traffic), np.nan)
    fin = np.full(len(traffic), np.nan)
    rep_of = np.zeros(len(traffic), dtype=np.int64)
    for part in parts:
        first[part.index] = part.first
        fin[part.index] = part.fin
        rep_of[part.index] = part.replica
    run.first, run.fin, run.routed_to = first.tolist(), fin.tolist(), routed.tolist()
    run.rep_of = rep_of.tolist()
    by_replica = [parts[owner[p]] for p in run.replica_pool]
    snap: dict[str, list[Any]] = {
        k: [part.snap[k][r] for r, part in enumerate(by_replica)] for k in _PER_REPLICA}
    snap.update({k: [parts[owner[p]].snap[k][p] for p in range(len(pools))] for k in _PER_POOL})
    run.snap = snap
    run.done = [parts[owner[p]].done[p] for p in range(len(pools))]
    run.backlog = [parts[owner[p]].backlog[p] for p in range(len(pools))]
    return outcome(run, now=max(part.stopped_at_s for part in parts))
