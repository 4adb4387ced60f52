"""When ``solve --confidence P`` has no plan: the margin that binds and the confidence that has one.

At confidence ``P`` each configuration's latencies count ``f`` times the predicted ones
(:mod:`fleetplan.optimize.confidence`), so a class whose SLO a configuration meets on its own
replica model may have no capacity there once the SLO is divided by ``f``. Two things say why:

- :func:`margin_phrase`: the margin of a configuration in words, with its size and the error
  table it comes from (``x6.43 latency margin of 1xA100-80GB at confidence 0.9, from
  data/spec_errors.json ...``);
- :func:`highest_confidence`: the highest confidence at which the MILP has a plan, searched by
  bisection on the capacities at each level (the same capacity searches as ``--confidence``;
  MILP only, not simulated), to :data:`STEP`, at most :data:`MAX_LEVELS` levels: the answer is a
  bracket (a level with a plan, the lowest level found without one).

Main entries: :func:`margin_phrase`, :func:`highest_confidence` (returns a :class:`Bracket`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from fleetplan.optimize.confidence import ConfigError, Margins, confidence_at

STEP = 0.01
MAX_LEVELS = 6
LOWEST = 0.5


def margin_phrase(e: ConfigError, confidence: float, configs: list[str] | None = None) -> str:
    """``x6.43 latency margin of 1xA100-80GB at confidence 0.9 (uncalibrated: data/spec_errors
    .json ...)``: its size, and the error table it comes from (``configs``: every configuration
    that shares both, default ``e``'s own)."""
    names = configs or [e.config]
    src = e.source.split("; factor")[0].split(": signed errors")[0]
    if len(names) > 1:  # the table, not the line of it that names one GPU
        src = _table_of(e) + (" (ttft_p99_ms; none measured on their GPU types)"
                              if "none measured on" in e.source else "")
    kind = "held-out errors of its server kind, " if e.calibrated else ""
    return (f"x{e.factor:.3g} latency margin of {', '.join(names)} at confidence "
            f"{confidence:g} ({kind}{src})")


def margins_phrase(m: Margins) -> str:
    """Every margin above 1 of ``m``; configurations that share one (size and table) together."""
    groups: dict[tuple[float, str, bool], list[str]] = {}
    first: dict[tuple[float, str, bool], ConfigError] = {}
    for c, e in sorted(m.configs.items()):
        if e.factor > 1.0:
            k = (round(e.factor, 3), _table_of(e), e.calibrated)
            groups.setdefault(k, []).append(c)
            first.setdefault(k, e)
    return "; ".join(margin_phrase(first[k], m.confidence, cs) for k, cs in groups.items())


def _table_of(e: ConfigError) -> str:
    """The error table of a margin, without the part that names its own GPU."""
    src = e.source.split("; factor")[0].split(": signed errors")[0]
    return src.split(" (ttft_p99_ms")[0]


def floor_confidence(e: ConfigError, slo_ms: float, floor_ms: float, keep: float) -> float:
    """The confidence at which a P99 of ``floor_ms`` (the best one replica of the configuration
    reached) still meets ``keep x slo_ms / f``: above it, that configuration cannot serve."""
    if floor_ms <= 0 or not math.isfinite(floor_ms):
        return 1.0
    return confidence_at(keep * slo_ms / floor_ms, e)


@dataclass(frozen=True)
class Bracket:
    """The highest confidence found with a plan (``None``: none, down to :data:`LOWEST`) and
    the lowest found without one."""

    has_plan: float | None
    no_plan: float

    def phrase(self) -> str:
        if self.has_plan is None:
            return (f"no plan at confidence {LOWEST:g} either (the MILP over the capacities at "
                    "that confidence)")
        how = ("by the MILP over the capacities at each confidence (bisection, not simulated: "
               f"solve --confidence {self.has_plan:g} checks it)")
        if self.no_plan - self.has_plan <= STEP + 1e-9:
            return (f"the highest confidence with a plan is {self.has_plan:g} (none at "
                    f"{self.no_plan:g}), {how}")
        return (f"a plan exists at confidence {self.has_plan:g} and none at {self.no_plan:g}, "
                f"{how}")


def highest_confidence(feasible: Callable[[float], bool], requested: float,
                       guess: float | None = None) -> Bracket:
    """Bisection on ``feasible(level)`` (the MILP has a plan at that confidence) between
    :data:`LOWEST` and ``requested`` (which has none), on levels of :data:`STEP`, at most
    :data:`MAX_LEVELS` calls; ``guess``: a level to try first (where one replica's best P99
    stops meeting its margin)."""
    def snap(v: float) -> float:
        return round(math.floor(v / STEP + 1e-9) * STEP, 2)

    hi = snap(requested + 1e-9)  # has no plan (the solve said so)
    lo: float | None = None      # has one
    calls = 0

    def test(level: float) -> None:
        nonlocal lo, hi, calls
        calls += 1
        if feasible(level):
            lo = level
        else:
            hi = level

    if guess is not None and LOWEST <= snap(guess) < hi:
        test(snap(guess))
        if lo is not None and snap(guess) + STEP < hi - 1e-9:  # the guess is usually the edge
            test(round(snap(guess) + STEP, 2))
        elif lo is None and snap(guess) - STEP >= LOWEST - 1e-9:
            # a guess a hair below a level snaps up onto it: the edge is the level below
            test(round(snap(guess) - STEP, 2))
    if lo is None and hi > LOWEST:
        test(LOWEST)
    if lo is None:
        return Bracket(None, hi)
    while calls < MAX_LEVELS and hi - lo > STEP + 1e-9:
        mid = snap((lo + hi) / 2)
        if mid <= lo:
            break
        test(mid)
    return Bracket(lo, hi)


def binding_margin(m: Margins, configs: list[str]) -> ConfigError | None:
    """The configuration of ``configs`` with the smallest margin (the best the class could
    have had), for the sentence that names it."""
    errs = [m.configs[c] for c in configs if c in m.configs]
    return min(errs, key=lambda e: (e.factor, e.config)) if errs else None
