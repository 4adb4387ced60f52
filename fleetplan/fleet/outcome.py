"""What a stopped fleet replication measured: the :class:`Replication` record.

:func:`outcome` reads a :class:`~fleetplan.fleet.world.FleetRun` once it stopped: the measured
requests' latencies as the client sees them (the host's delivery lag added,
:mod:`fleetplan.replica.delivery`; requests without a first token or not finished when the run
stopped enter censored, at the time waited so far: a lower bound) and each pool's statistics
over the window. A pool whose backlog grew over the window by more than normal fluctuation
(:data:`GROWTH_SHARE`, :data:`GROWTH_FLOOR`), or that stopped the run, is marked overloaded; its
completions per second are then its sustainable rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.fleet.world import FleetRun
from fleetplan.replica.delivery import client_lags

__all__ = ["GROWTH_FLOOR", "GROWTH_SHARE", "Replication", "outcome"]

# Growth of a pool's backlog over the measured window that marks it overloaded: more than this
# share of its measured requests and more than GROWTH_FLOOR per replica.
GROWTH_SHARE = 0.03
GROWTH_FLOOR = 32


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


def _delivered(run: FleetRun, first: np.ndarray, fin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The times the client receives each finished request's first and last token: the
    engine's plus the host's lag and the stream delay on the replica slot that served it
    (:mod:`fleetplan.replica.delivery`; requests still running at the stop have no recorded
    first token, so they are not counted among a step's decoders)."""
    slot = np.asarray(run.rep_of, dtype=np.int64)
    pool_of_slot = np.asarray(run.replica_pool, dtype=np.int64)
    lag_first, lag_last = np.zeros(first.size), np.zeros(first.size)
    for p, pm in enumerate(run.pools):  # a pool without lags gets zeros from client_lags
        mine = pool_of_slot[slot] == p
        lag_first[mine], lag_last[mine] = client_lags(first[mine], fin[mine], pm.params,
                                                      replica=slot[mine])
    return first + lag_first, fin + lag_last


def outcome(run: FleetRun, now: float | None = None) -> Replication:
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
    retried, lost, availability = run.failures(m, w0, end)
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
        retried=retried, lost=lost, availability=availability,
    )


def _per_pool(run: FleetRun, window: float, what: str) -> tuple[float, ...]:
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


def _overloaded(run: FleetRun, pools_of: np.ndarray) -> tuple[bool, ...]:
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
