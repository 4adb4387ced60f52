"""The replies that end a burst: output lengths of the protocol's last requests, from durations.

Every run of the bundled protocol sends the same 200 ShareGPT prompts in the same order
(``benchmark_serving.py --seed 42``) at send times ``s_i / rate``, where ``s_i`` are the unit-rate
times of the seed (Poisson arrivals: numpy's gamma draws scale with ``1 / rate``). A run lasts
until its last reply ends, so its tail after the last send,
``duration - s_last / rate - TTFT``, is decided by a few long replies sent near the end:

    tail(rate) ~ max(L_last * tau, L_k * tau - (s_last - s_k) / rate)

with ``tau`` the run's own per-token time (its TPOT p50, while the late replies share the
batch; the series' lowest-rate TPOT, which must be unflagged, only decides which runs queue),
``L_last``
the last request's output tokens and ``L_k`` those of one long reply at position ``k``. These
three figures are shared by every run of the same prompt set and tokenizer (same
``total_input_tokens``) and are fitted (grid, squared log error) over all such runs of servers
that do not queue (below the series' highest rate, TTFT p99 under :data:`MAX_QUEUE_STEPS`
decode steps, unflagged): in the
bundled store a single ~820-950 token reply at position 181-187 and a last reply of ~170-250
tokens explain the tails of 1, 4 and 16 req/s runs on every single-GPU configuration within a
few percent (e.g. 41650 prompt tokens: 24 runs, rms 5 %). What this leaves out (a long reply
earlier in the burst; the replay decodes a late reply faster than the run's TPOT) makes 16 and
32 req/s replays drain fast: docs/replica-model.md, "Why the replayed bursts drain fast". The
replay then gives those two requests these lengths and spreads the remaining output tokens
over the others (:func:`fleetplan.replica.protocol.sample_lengths`).

Main entries: :func:`infer_burst_tails` (runs -> :class:`BurstTail` per prompt set) and
:func:`tail_for` (the tail that applies to one run, if any).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from fleetplan.replica.measured_run import MeasuredRun
from fleetplan.replica.protocol import vllm_arrivals

MAX_QUEUE_STEPS = 20.0  # a run whose TTFT p99 exceeds this many decode steps is queueing
LONG_WINDOW = 50  # the long reply is searched among the last this-many requests
LAST_GRID = np.arange(50, 601, 5, dtype=float)
LONG_GRID = np.arange(200, 1501, 10, dtype=float)
MIN_RUNS = 3


@dataclass(frozen=True)
class BurstTail:
    """Output tokens of the two replies that end a burst of one prompt set."""

    family: str  # "<num_prompts>:<total_input_tokens>"
    last_tokens: int
    long_index: int
    long_tokens: int
    runs: int
    rms_log_error: float

    def pinned(self, num_prompts: int) -> tuple[tuple[int, int], ...]:
        """(request index, output tokens) pairs for a run of ``num_prompts``."""
        return ((self.long_index, self.long_tokens), (num_prompts - 1, self.last_tokens))

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "last_tokens": self.last_tokens,
                "long_index": self.long_index, "long_tokens": self.long_tokens,
                "runs": self.runs, "rms_log_error": round(self.rms_log_error, 6)}


def family_key(num_prompts: int, total_input_tokens: int) -> str:
    """The prompt set of a run: its size and its prompt tokens (one tokenizer's count)."""
    return f"{num_prompts}:{total_input_tokens}"


def _unit_times(n: int, seed: int) -> np.ndarray:
    times, _end = vllm_arrivals(n, 1.0, 1.0, seed)
    return times


def _observations(runs: Sequence[MeasuredRun], seed: int
                  ) -> dict[str, list[tuple[float, float, float]]]:
    """Per prompt set: (rate, tau, observed tail seconds) of the runs that can show it."""
    good = [r for r in runs if not r.flagged and r.burstiness == 1.0
            and r.request_rate < r.series_max_rate  # the first run of a series queues
            and math.isfinite(r.duration_s) and r.measured.get("tpot_p50_ms", 0) > 0
            and r.measured.get("ttft_p50_ms", 0) > 0]
    lowest: dict[tuple[str, str], float] = {}
    for r in runs:
        lowest[r.key] = min(lowest.get(r.key, math.inf), r.request_rate)
    # tau: the TPOT of the series' lowest-rate run, when that run is usable (not flagged)
    tau = {r.key: r.measured["tpot_p50_ms"] / 1e3 for r in good
           if r.request_rate == lowest[r.key]}
    out: dict[str, list[tuple[float, float, float]]] = {}
    times: dict[int, np.ndarray] = {}
    for r in good:
        if r.key not in tau:
            continue
        # the run's own TPOT: the per-token time while the late replies share the batch
        t = r.measured["tpot_p50_ms"] / 1e3
        if r.measured.get("ttft_p99_ms", math.inf) / 1e3 > MAX_QUEUE_STEPS * tau[r.key]:
            continue
        s = times.setdefault(r.num_prompts, _unit_times(r.num_prompts, seed))
        tail = r.duration_s - s[-1] / r.request_rate - r.measured["ttft_p50_ms"] / 1e3
        if tail > 0:
            out.setdefault(family_key(r.num_prompts, r.total_input_tokens), []).append(
                (r.request_rate, t, tail))
    return out


def infer_burst_tails(runs: Sequence[MeasuredRun], *, seed: int = 42) -> dict[str, BurstTail]:
    """Fit each prompt set's :class:`BurstTail` to the runs (see the module docstring); prompt
    sets with fewer than :data:`MIN_RUNS` usable runs or a single rate get none."""
    out: dict[str, BurstTail] = {}
    for fam, obs in sorted(_observations(runs, seed).items()):
        if len(obs) < MIN_RUNS or len({o[0] for o in obs}) < 2:
            continue
        out[fam] = _fit_family(fam, tuple(sorted(obs)), seed)
    return out


@lru_cache(maxsize=64)
def _fit_family(fam: str, obs: tuple[tuple[float, float, float], ...], seed: int) -> BurstTail:
    n = int(fam.split(":")[0])
    s = _unit_times(n, seed)
    rate = np.array([o[0] for o in obs])
    tau = np.array([o[1] for o in obs])
    tail = np.array([o[2] for o in obs])
    best: tuple[float, int, float, float] | None = None
    last = LAST_GRID[:, None, None] * tau  # (last, 1, run)
    for k in range(max(0, n - 1 - LONG_WINDOW), n - 1):
        gap = (s[-1] - s[k]) / rate
        long = LONG_GRID[:, None] * tau - gap  # (long, run)
        pred = np.maximum(last, long[None, :, :])
        err = (np.log(np.maximum(pred, 1e-6) / tail) ** 2).sum(axis=2)
        i, j = np.unravel_index(int(np.argmin(err)), err.shape)
        cand = (float(err[i, j]), k, float(LAST_GRID[i]), float(LONG_GRID[j]))
        if best is None or cand[0] < best[0]:
            best = cand
    assert best is not None
    return BurstTail(family=fam, last_tokens=int(best[2]), long_index=best[1],
                     long_tokens=int(best[3]), runs=len(obs),
                     rms_log_error=math.sqrt(best[0] / len(obs)))


def tail_for(tails: Mapping[str, BurstTail], num_prompts: int,
             total_input_tokens: int) -> tuple[tuple[int, int], ...]:
    """The pinned (index, output tokens) of a run's prompt set, empty when none is known."""
    t = tails.get(family_key(num_prompts, total_input_tokens))
    return t.pinned(num_prompts) if t is not None else ()
