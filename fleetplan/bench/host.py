"""The client host's CPUs during a benchmark run: what a first-token delay of the host needs.

Main entries: :func:`start_host_watch` (a snapshot at the run's start) and
:meth:`HostWatch.stop` (the :class:`HostFacts` of the run: the ``host_*`` and ``client_cpu_*``
fields of the result file).

Why: the study's tensor-parallel RTX 4090 runs show first tokens seconds late at low load while
their tokens were computed on time (docs/replica-model.md, "what they are"); the leading
explanation is a host short of CPU (busy-polling workers beside the API server and the client),
which the study's files cannot confirm because they do not record the host. A run of
``fleetplan bench`` against a server on the same host records it: the CPUs this process may use,
the container's CPU limit (cgroup v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``), the time the
cgroup was throttled for exceeding it during the run (``cpu.stat``), the client's own CPU time
and the 1-minute load average at the end. Every figure is ``None`` where the host does not say
(another OS, no cgroup file, an unreadable value): they describe, they never fail a run.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class HostFacts:
    """The client host's CPUs over one run (``None``: the host did not say)."""

    cpus: int | None = None  # CPUs this process may run on (its affinity)
    cpu_limit: float | None = None  # the cgroup's CPU limit, in CPUs; None: none or unknown
    throttled_ms: float | None = None  # time the cgroup was throttled during the run
    client_cpu_s: float | None = None  # CPU time the client process used during the run
    client_cpu_share: float | None = None  # client_cpu_s / the run's wall time
    load_avg_1m: float | None = None  # at the run's end

    def fields(self) -> dict[str, Any]:
        return {"host_cpus": self.cpus, "host_cpu_limit": self.cpu_limit,
                "host_cpu_throttled_ms": self.throttled_ms, "client_cpu_s": self.client_cpu_s,
                "client_cpu_share": self.client_cpu_share,
                "host_load_avg_1m": self.load_avg_1m}


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def cpu_limit(root: Path = CGROUP_ROOT) -> float | None:
    """The cgroup's CPU limit in CPUs (quota / period), or ``None`` for none or unknown."""
    text = _read(root / "cpu.max")  # cgroup v2: "max 100000" or "200000 100000"
    if text is not None:
        parts = text.split()
        if len(parts) == 2 and parts[0] != "max":
            return _ratio(parts[0], parts[1])
        return None
    quota = _read(root / "cpu" / "cpu.cfs_quota_us")  # cgroup v1: -1 for none
    period = _read(root / "cpu" / "cpu.cfs_period_us")
    if quota is None or period is None:
        return None
    return _ratio(quota, period)


def _ratio(quota: str, period: str) -> float | None:
    try:
        q, p = float(quota), float(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def throttled_s(root: Path = CGROUP_ROOT) -> float | None:
    """Seconds the cgroup has been throttled so far (``cpu.stat``), or ``None``."""
    for path, key, scale in ((root / "cpu.stat", "throttled_usec", 1e-6),
                             (root / "cpu" / "cpu.stat", "throttled_time", 1e-9)):
        text = _read(path)
        if text is None:
            continue
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                try:
                    return float(value) * scale
                except ValueError:
                    return None
    return None


def usable_cpus() -> int | None:
    """CPUs this process may run on (its affinity; the machine's count where that is unknown)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


@dataclass(frozen=True)
class HostWatch:
    """A snapshot at a run's start; :meth:`stop` gives the run's :class:`HostFacts`."""

    root: Path
    wall_s: float
    cpu_s: float
    throttled_s: float | None

    def stop(self) -> HostFacts:
        wall = time.perf_counter() - self.wall_s
        cpu = time.process_time() - self.cpu_s
        now = throttled_s(self.root)
        throttled = (None if now is None or self.throttled_s is None
                     else max(0.0, now - self.throttled_s) * 1e3)
        try:
            load: float | None = os.getloadavg()[0]
        except (AttributeError, OSError):
            load = None
        return HostFacts(cpus=usable_cpus(), cpu_limit=cpu_limit(self.root),
                         throttled_ms=throttled, client_cpu_s=cpu,
                         client_cpu_share=cpu / wall if wall > 0 else None, load_avg_1m=load)


def start_host_watch(root: Path | None = None) -> HostWatch:
    """Snapshot the clocks and the cgroup's throttled time at a run's start (``root``: the
    cgroup folder, default :data:`CGROUP_ROOT`)."""
    root = CGROUP_ROOT if root is None else root
    return HostWatch(root, time.perf_counter(), time.process_time(), throttled_s(root))
