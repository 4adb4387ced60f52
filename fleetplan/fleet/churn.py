"""Churn in a fleet simulation: replicas that fail (or are preempted) and are replaced.

Main entries: :func:`churn_seeds` (one generator stream per replication, apart from the
traffic's, so a scenario without a ``reliability:`` block simulates exactly as before) and
:func:`start_churn` (one SimPy process per replica of a failing pool).

Each replica alternates between up times drawn from an exponential distribution (mean
``1 / failures per second``) and down times of exactly ``replace_s`` (a fresh replica, with an
empty cache, then takes its place). It starts in its steady state: down with probability
``u = lambda R / (1 + lambda R)`` for a uniform share of ``R``, else up, so a short run sees
failures as often as a long one does per second. What a failure does to the requests on the
replica (re-sent at once to another replica of the class, TTFT still counted from the first
send; lost when no replica it may use is up) is the simulator's (:mod:`fleetplan.fleet.failover`).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Protocol

import numpy as np
import simpy

from fleetplan.scenario.reliability import SECONDS_PER_HOUR, PoolReliability

# the churn streams' own entropy word: independent of the traffic's SeedSequence(seed).spawn
CHURN_TAG = 0x636875726E


class Failable(Protocol):
    """What the churn processes drive: the simulator's run."""

    env: simpy.Environment

    def fail(self, slot: int) -> None: ...

    def restore(self, slot: int) -> None: ...


def churn_seeds(seed: int, replications: int) -> list[np.random.SeedSequence]:
    """One churn stream per replication (its replicas' streams are spawned from it)."""
    return np.random.SeedSequence([seed, CHURN_TAG]).spawn(replications)


def _replica(run: Failable, slot: int, rel: PoolReliability,
             rng: np.random.Generator) -> Generator[simpy.Event, object, None]:
    env = run.env
    mean_up_s = SECONDS_PER_HOUR / rel.failures_per_hour
    down_s = rel.replace_s
    if rng.random() < rel.unavailability:  # steady state: down now, for part of R
        run.fail(slot)
        yield env.timeout(rng.uniform(0.0, down_s))
        run.restore(slot)
    while True:
        yield env.timeout(rng.exponential(mean_up_s))
        run.fail(slot)
        yield env.timeout(down_s)
        run.restore(slot)


def start_churn(run: Failable, slot_pool: Sequence[int],
                pools: Sequence[PoolReliability | None], seed: np.random.SeedSequence) -> int:
    """Start a failure process for every replica (``slot_pool[r]``: its pool) whose pool fails;
    returns how many were started. Every replica's stream is spawned, failing or not, so one
    pool's rate never changes another's draws."""
    streams = seed.spawn(len(slot_pool))
    started = 0
    for slot, p in enumerate(slot_pool):
        rel = pools[p]
        if rel is None or not rel.active:
            continue
        run.env.process(_replica(run, slot, rel, np.random.default_rng(streams[slot])))
        started += 1
    return started
