"""One replication of a fleet: replica engines, a router and the traffic in one SimPy world.

Main entry: :func:`run_replication`; the world it runs is :mod:`fleetplan.fleet.world`, a world
whose replicas fail :mod:`fleetplan.fleet.failover`, and what it measured
:mod:`fleetplan.fleet.outcome`. Requests arriving in ``[warmup_s, duration_s)`` are
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

from collections.abc import Callable, Sequence

import numpy as np

from fleetplan.fleet.churn import start_churn
from fleetplan.fleet.failover import ChurnRun
from fleetplan.fleet.outcome import Replication, outcome
from fleetplan.fleet.pools import PoolModel
from fleetplan.fleet.traffic import Traffic
from fleetplan.fleet.world import FleetRun, RoutingInputs, run_to_stop
from fleetplan.scenario.reliability import PoolReliability

__all__ = ["Replication", "RoutingInputs", "run_replication"]


def run_replication(pools: Sequence[PoolModel], traffic: Traffic, routing: RoutingInputs, *,
                    warmup_s: float, duration_s: float,
                    progress: Callable[[float], None] | None = None,
                    churn: Sequence[PoolReliability | None] | None = None,
                    churn_seed: np.random.SeedSequence | None = None) -> Replication:
    """Simulate ``traffic`` on ``pools`` with the routing policy; see the module docstring.
    ``churn``: per pool its failure model (``None``: never fails) and ``churn_seed`` the
    replication's churn stream."""
    run: FleetRun
    if churn is not None and any(c is not None and c.active for c in churn):
        run = ChurnRun(pools, traffic, routing, warmup_s, duration_s)
        start_churn(run, run.replica_pool, churn, churn_seed or np.random.SeedSequence(0))
    else:
        run = FleetRun(pools, traffic, routing, warmup_s, duration_s)
    return outcome(run_to_stop(run, progress))
