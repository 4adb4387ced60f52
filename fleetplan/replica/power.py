"""GPU power that follows the work: each engine step draws between idle and TDP by what it does.

Shape, from published measurements of GPUs serving LLMs (cited in ``data/README.md``):

- The ML.ENERGY Benchmark v3.0 (Chung et al., "Where Do the Joules Go? Diagnosing Inference
  Energy Consumption", arXiv:2601.22076, 2026): an H100 SXM5 (TDP 700 W) serving an LLM with
  vLLM draws about 300 W at batch size 1 and about 600 W at batch size 128 (the two anchors
  as the vLLM Semantic Router fleet simulator documents them, ``docs/fleet-sim/power-model``);
  the same study reports 3-5x energy-per-token differences from GPU utilization alone.
- Splitwise (Patel et al., ISCA 2024, arXiv:2311.18677): the prompt (prefill) phase is
  compute-bound and draws near TDP; token generation is memory-bound and draws less.

Model (:func:`step_activity`): a step that processes ``T`` tokens (its prefill tokens plus one
per decoding sequence) draws ``idle + (tdp - idle) * f(T)`` per GPU, with ``f`` log-linear in
``T`` through the two ML.ENERGY anchors (expressed as shares of the idle-to-TDP range with the
H100 SXM's catalog idle power) and capped at 1 (TDP) beyond them, where Splitwise's near-TDP
prefill lies; between steps the GPU draws its idle power. Named assumption: the same shares
apply to every GPU type (the anchors were measured on H100 SXM only). ``scale`` stretches the
dynamic part when a configuration's own NVML energy is known (:func:`fit_activity_scale` fits it
from the ``gpu_energy_j`` that ``fleetplan bench`` writes to the store; the fleet simulator does
not apply a fitted scale yet: its energy uses ``scale`` 1).

The engine sums ``f(T) x step duration`` over its steps (``EngineStats.active_s``); energy over
a window of ``W`` seconds is ``gpus * (idle * W + (tdp - idle) * scale * active_s)``
(:func:`energy_j`). The fleet simulator charges its pools this way (scenario
``power: {model: activity}``, :data:`ACTIVITY_MODE`, the default); ``power: {model: tdp}``
(:data:`TDP_MODE`: ``idle + (busy - idle) x`` the engine's busy share, every GPU at TDP whenever a
request is in flight, the study's Table 3 assumption) stays available.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

ANCHOR_TDP_W = 700.0  # H100 SXM5
ANCHOR_IDLE_W = 70.0  # catalog idle power of the H100 SXM (data/gpus.csv)
ANCHOR_LOW = (1, 300.0)  # (batch size, W): ML.ENERGY Benchmark v3.0
ANCHOR_HIGH = (128, 600.0)
POWER_SOURCE = ("per-step power between idle and TDP, log-linear in the step's tokens through "
                "ML.ENERGY Benchmark v3.0's H100 anchors (batch 1: 300 W, batch 128: 600 W of "
                "700 W), capped at TDP (Splitwise: prefill near TDP); same shares on every GPU "
                "(assumption)")
ACTIVITY_MODE = "activity"  # scenario ``power: {model: activity}`` (the default)
WORK_MODE = ACTIVITY_MODE
TDP_MODE = "tdp"
POWER_MODES = (ACTIVITY_MODE, TDP_MODE)


def _share(watts: float) -> float:
    return (watts - ANCHOR_IDLE_W) / (ANCHOR_TDP_W - ANCHOR_IDLE_W)


F_LOW = _share(ANCHOR_LOW[1])
F_HIGH = _share(ANCHOR_HIGH[1])
_SLOPE = (F_HIGH - F_LOW) / math.log(ANCHOR_HIGH[0] / ANCHOR_LOW[0])


@functools.lru_cache(maxsize=1 << 16)
def step_activity(tokens: int) -> float:
    """Share of the idle-to-TDP power range a step of ``tokens`` tokens draws (0 when empty)."""
    if tokens <= 0:
        return 0.0
    return min(1.0, max(F_LOW, F_LOW + _SLOPE * math.log(tokens / ANCHOR_LOW[0])))


@dataclass(frozen=True)
class StepPower:
    """Per-GPU power of one configuration: idle, TDP and the fitted scale of the dynamic part."""

    idle_w: float
    tdp_w: float
    scale: float = 1.0
    source: str = POWER_SOURCE

    def mean_watts(self, window_s: float, active_s: float) -> float:
        """Mean power per GPU over ``window_s`` seconds that hold ``active_s`` of activity."""
        if window_s <= 0:
            return self.idle_w
        dyn = min(1.0, self.scale * active_s / window_s)
        return self.idle_w + (self.tdp_w - self.idle_w) * dyn


def energy_j(power: StepPower, gpus: int, window_s: float, active_s: float) -> float:
    """Energy (J) of ``gpus`` GPUs over ``window_s`` seconds holding ``active_s`` of activity."""
    return gpus * power.mean_watts(window_s, active_s) * window_s


def fit_activity_scale(power: StepPower, gpus: int,
                       runs: Sequence[tuple[float, float, float]]) -> float | None:
    """The scale of the dynamic part that matches measured NVML energy: ``runs`` holds
    (window s, engine activity s, measured joules of all GPUs) per replayed run. The geometric
    mean of the per-run ratios; None without a usable run."""
    logs = []
    for window, active, joules in runs:
        dyn_model = (power.tdp_w - power.idle_w) * active
        dyn_meas = joules / gpus - power.idle_w * window
        if window > 0 and dyn_model > 0 and dyn_meas > 0:
            logs.append(math.log(dyn_meas / dyn_model))
    return math.exp(sum(logs) / len(logs)) if logs else None
