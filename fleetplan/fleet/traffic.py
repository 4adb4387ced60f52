"""The requests of one replication: every class's arrivals and lengths, merged in time order.

Main entry: :func:`build_traffic`. Each class draws from its own generators (one for arrival
times, one for lengths), spawned from the replication's seed, so changing the fleet or another
class never changes a class's requests (common random numbers across what-if runs), and doubling
a rate only halves the gaps of the same draws. Requests longer than the class's context window
(prompt + output) are an error naming the class and the count, or are dropped and counted when
the class says ``overlong: drop``. A class's ``prefix_cache_hit`` (a stated assumption, no random
draw) sets each request's prompt tokens already in the prefix cache
(:func:`fleetplan.replica.steady.cached_prompt_tokens`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import InputError
from fleetplan.replica.steady import cached_prompt_tokens
from fleetplan.scenario import Scenario
from fleetplan.workload.trace import Trace, read_trace, trace_requests


@dataclass(frozen=True)
class Traffic:
    """All requests of a replication, sorted by arrival (ties: class order, then draw order)."""

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    cls: np.ndarray
    dropped: tuple[int, ...]            # per class: requests dropped as too long
    cached_tokens: np.ndarray | None = None  # prompt tokens in the prefix cache (None: none)

    def __len__(self) -> int:
        return int(self.arrival_s.size)


def load_traces(scenario: Scenario) -> dict[str, Trace]:
    """Read every trace the scenario names (once), naming the class field on error."""
    out: dict[str, Trace] = {}
    for i, c in enumerate(scenario.classes):
        if c.trace is None or c.trace.file in out:
            continue
        try:
            out[c.trace.file] = read_trace(c.trace.file)
        except InputError as exc:
            raise InputError(f"classes[{i}].trace.file: {exc}") from None
    return out


def _class_requests(scenario: Scenario, i: int, traces: Mapping[str, Trace],
                    rng_t: np.random.Generator,
                    rng_l: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    c = scenario.classes[i]
    sim = scenario.sim
    if c.trace is not None:
        try:
            return trace_requests(traces[c.trace.file], sim.duration_s,
                                  scale_to_rps=c.trace.scale_to_rps, loop=c.trace.loop)
        except InputError as exc:
            raise InputError(f"classes[{i}].trace: {exc}") from None
    t = c.process.times(sim.duration_s, rng_t, start_hour=sim.start_hour)
    try:
        ins, outs = c.length_model().sample(t.size, rng_l)
    except ValueError as exc:
        raise InputError(f"classes[{i}] ({c.name}): {exc}") from None
    return t, ins, outs


def build_traffic(scenario: Scenario, seed: np.random.SeedSequence,
                  windows: Sequence[tuple[int, str]],
                  traces: Mapping[str, Trace] | None = None) -> Traffic:
    """The replication's requests. ``windows[c]`` is class ``c``'s context window in tokens and
    the configuration that sets it (the smallest among the pools the class may use)."""
    if traces is None:
        traces = load_traces(scenario)
    n = len(scenario.classes)
    streams = seed.spawn(2 * n)
    parts, dropped = [], []
    for i, c in enumerate(scenario.classes):
        t, ins, outs = _class_requests(scenario, i, traces, np.random.default_rng(streams[2 * i]),
                                       np.random.default_rng(streams[2 * i + 1]))
        window, config = windows[i]
        too_long = (ins + outs) > window
        k = int(too_long.sum())
        if k and c.overlong == "error":
            where = f" of {os.path.basename(c.trace.file)}" if c.trace is not None else ""
            raise InputError(
                f"class {c.name}: {k} of {t.size} requests{where} need more than the {window}-"
                f"token context window of {config} (prompt + output); set overlong: drop on the "
                "class to drop them, or raise context_window")
        if k:
            keep = ~too_long
            t, ins, outs = t[keep], ins[keep], outs[keep]
        dropped.append(k)
        cached = cached_prompt_tokens(ins, c.prefix_cache_hit)
        parts.append((t, ins, outs, np.full(t.size, i, dtype=np.int64),
                      cached if cached is not None else np.zeros(t.size, dtype=np.int64)))
    times = np.concatenate([p[0] for p in parts])
    cls = np.concatenate([p[3] for p in parts])
    order = np.lexsort((np.arange(times.size), cls, times))
    any_cached = any(c.prefix_cache_hit > 0 for c in scenario.classes)
    return Traffic(
        arrival_s=times[order],
        input_tokens=np.concatenate([p[1] for p in parts])[order].astype(np.int64),
        output_tokens=np.concatenate([p[2] for p in parts])[order].astype(np.int64),
        cls=cls[order], dropped=tuple(dropped),
        cached_tokens=(np.concatenate([p[4] for p in parts])[order].astype(np.int64)
                       if any_cached else None),
    )
