"""GPU power and energy over a benchmark run, from NVML (``nvidia-ml-py``) when present.

Main entry: :func:`open_power` (``"nvml"`` or ``"none"``) -> a monitor with ``start()`` and
``stop() -> PowerReport``. With NVML, the energy is the difference of each GPU's total-energy
counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ, Volta and newer) between start and stop;
power is also sampled every ``interval_s`` in a background thread (mean and peak), and on GPUs
without the counter the energy is the time integral of those samples (the report says which).
Without NVML every figure is ``None`` and :attr:`PowerReport.status` is ``"unknown"`` with the
reason: nothing is guessed.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

PowerKind = Literal["nvml", "none"]


@dataclass(frozen=True)
class PowerReport:
    """Energy and power of the measured GPUs over one run (all GPUs summed)."""

    status: Literal["measured", "unknown"]
    source: str
    gpu_names: tuple[str, ...] = ()
    gpu_energy_j: float | None = None
    gpu_energy_j_per_gpu: tuple[float, ...] | None = None
    gpu_avg_power_w: float | None = None
    gpu_sampled_power_mean_w: float | None = None
    gpu_sampled_power_max_w: float | None = None
    samples: int = 0
    duration_s: float | None = None

    def fields(self) -> dict[str, Any]:
        """The report as result fields (names of the result JSON)."""
        return {
            "power_status": self.status,
            "power_source": self.source,
            "gpu_names": list(self.gpu_names),
            "gpu_energy_j": self.gpu_energy_j,
            "gpu_energy_j_per_gpu": (list(self.gpu_energy_j_per_gpu)
                                     if self.gpu_energy_j_per_gpu is not None else None),
            "gpu_avg_power_w": self.gpu_avg_power_w,
            "gpu_sampled_power_mean_w": self.gpu_sampled_power_mean_w,
            "gpu_sampled_power_max_w": self.gpu_sampled_power_max_w,
            "gpu_power_samples": self.samples,
        }


class PowerMonitor(Protocol):
    def start(self) -> None: ...
    def stop(self) -> PowerReport: ...


@dataclass
class NoPower:
    """A monitor that measures nothing and says why."""

    reason: str

    def start(self) -> None:
        return None

    def stop(self) -> PowerReport:
        return PowerReport(status="unknown", source=self.reason)


@dataclass
class NvmlPower:
    """Energy counters and sampled power of NVML devices (indices as NVML numbers them)."""

    nvml: Any
    handles: list[Any]
    names: list[str]
    interval_s: float = 0.1
    _e0: list[float | None] = field(default_factory=list)
    _t0: float = 0.0
    _samples: list[tuple[float, list[float]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _energy_j(self, h: Any) -> float | None:
        try:
            return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(h)) / 1e3
        except self.nvml.NVMLError:
            return None

    def _power_w(self) -> list[float]:
        return [float(self.nvml.nvmlDeviceGetPowerUsage(h)) / 1e3 for h in self.handles]

    def _loop(self) -> None:
        while not self._stop.is_set():
            # a missed sample is not a value; the sample count in the report shows it
            with contextlib.suppress(self.nvml.NVMLError):
                self._samples.append((time.perf_counter(), self._power_w()))
            self._stop.wait(self.interval_s)

    def start(self) -> None:
        self._stop.clear()
        self._samples = []
        self._e0 = [self._energy_j(h) for h in self.handles]
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._loop, name="fleetplan-nvml", daemon=True)
        self._thread.start()

    def stop(self) -> PowerReport:
        e1 = [self._energy_j(h) for h in self.handles]
        t1 = time.perf_counter()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with contextlib.suppress(self.nvml.NVMLError):
            self.nvml.nvmlShutdown()
        duration = t1 - self._t0
        per_gpu_sampled = [[s[1][i] for s in self._samples] for i in range(len(self.handles))]
        totals = [sum(s[1]) for s in self._samples]
        mean_w = sum(totals) / len(totals) if totals else None
        max_w = max(totals) if totals else None
        if all(a is not None and b is not None for a, b in zip(self._e0, e1, strict=True)):
            per_gpu = tuple(float(b) - float(a)  # type: ignore[arg-type]
                            for a, b in zip(self._e0, e1, strict=True))
            source = "nvml energy counter (nvmlDeviceGetTotalEnergyConsumption) deltas"
        elif len(self._samples) >= 2:
            times = [s[0] for s in self._samples]
            # the first and last samples stand for the edges of the window they miss
            per_gpu = tuple(_trapezoid(times, w) + w[0] * (times[0] - self._t0)
                            + w[-1] * (t1 - times[-1]) for w in per_gpu_sampled)
            source = (f"nvml sampled power (every {self.interval_s:g} s) integrated over time; "
                      "the energy counter is not supported on these GPUs")
        else:
            return PowerReport(status="unknown", gpu_names=tuple(self.names),
                               source="nvml: no energy counter and too few power samples")
        energy = sum(per_gpu)
        return PowerReport(status="measured", source=source, gpu_names=tuple(self.names),
                           gpu_energy_j=energy, gpu_energy_j_per_gpu=per_gpu,
                           gpu_avg_power_w=energy / duration if duration > 0 else None,
                           gpu_sampled_power_mean_w=mean_w, gpu_sampled_power_max_w=max_w,
                           samples=len(self._samples), duration_s=duration)


def _trapezoid(t: list[float], y: list[float]) -> float:
    return sum((t[i + 1] - t[i]) * (y[i] + y[i + 1]) / 2 for i in range(len(t) - 1))


def open_power(kind: PowerKind, gpu_indices: list[int] | None = None,
               interval_s: float = 0.1) -> PowerMonitor:
    """A power monitor: NVML when asked for and available, otherwise one that says unknown."""
    if kind == "none":
        return NoPower("unknown: power measurement off (--power none)")
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return NoPower("unknown: nvidia-ml-py is not installed (pip install 'fleetplan[nvml]')")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return NoPower(f"unknown: NVML could not start ({exc})")
    try:
        count = pynvml.nvmlDeviceGetCount()
        indices = list(range(count)) if gpu_indices is None else list(gpu_indices)
        bad = [i for i in indices if not 0 <= i < count]
        if bad or not indices:
            pynvml.nvmlShutdown()
            return NoPower(f"unknown: GPU indices {bad or indices} not among the {count} "
                           "NVML devices")
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices]
        names = [_text(pynvml.nvmlDeviceGetName(h)) for h in handles]
    except pynvml.NVMLError as exc:
        pynvml.nvmlShutdown()
        return NoPower(f"unknown: NVML error ({exc})")
    return NvmlPower(pynvml, handles, names, interval_s=interval_s)


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)
