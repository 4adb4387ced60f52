"""The notes a plan or a simulation carries, as records a terminal can choose from.

A note is a :class:`Note`: a string (so every ``notes`` list of the JSON contracts stays a list
of strings) that also says what it is about: its ``topic``, the ``pools`` it concerns
(configurations such as ``2xRTX-4090`` or pool keys such as ``1xRTX-4090@EU27~spot``; none: the
plan as a whole), its ``level`` (:data:`PLAN`: what a planner should know about this plan;
:data:`DETAIL`: how the figures were made) and a ``priority`` (lower first). A plain string is a
detail note of topic ``other``.

The terminal shows :func:`headline` by default: the planner-level notes that concern the pools
on hand, most important first, at most :data:`HEADLINE_LIMIT`; ``--verbose`` shows every note
and ``--format json`` carries all of them (``notes``, and ``notes_detail`` with the fields).
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Iterable
from typing import Any, NamedTuple

PLAN = "plan"
DETAIL = "detail"
HEADLINE_LIMIT = 3

# priorities of the planner-level notes (lower first): a plan that does not hold comes before
# figures that may be off, which come before assumptions on price and availability
P_NOT_MET = 0
P_ACCURACY = 10
P_FIT = 20
P_PRICE = 30
P_SPARES = 40
P_DETAIL = 100


class Note(str):
    """A note's text with its topic, pools, level and priority (module docstring)."""

    topic: str
    pools: tuple[str, ...]
    level: str
    priority: int

    def __new__(cls, text: str, topic: str, *, pools: Iterable[str] = (), level: str = DETAIL,
                priority: int = P_DETAIL) -> Note:
        note = super().__new__(cls, text)
        note.topic = topic
        note.pools = tuple(pools)
        note.level = level
        note.priority = priority
        return note

    def __reduce__(self) -> Any:  # pickled through process pools with its fields
        return (_rebuild, (str(self), self.topic, self.pools, self.level, self.priority))


def _rebuild(text: str, topic: str, pools: tuple[str, ...], level: str, priority: int) -> Note:
    return Note(text, topic, pools=pools, level=level, priority=priority)


def exact_decimals(v: float, digits: int = 2) -> int | None:
    """The fewest decimals, ``digits`` to 4, that show ``v`` as it is (None: it needs more)."""
    return next((d for d in range(digits, 5) if abs(round(v, d) - v) < 1e-9), None)


def usd(v: float | None, digits: int = 2) -> str:
    """Dollars with at least ``digits`` decimals: a figure exact to 4 decimals as it is
    ($0.125, not $0.12; $0.50, not $0.5), any other with at least 3 significant figures; an
    em dash for no value."""
    if v is None:
        return "\u2014"
    d = exact_decimals(v, digits)
    if d is not None:
        return f"${v:,.{d}f}"
    sig3 = 2 - math.floor(math.log10(abs(v))) if v else digits
    return f"${v:,.{max(digits, sig3)}f}"


def as_note(text: str) -> Note:
    """``text`` as a :class:`Note` (a plain string: a detail note of topic ``other``)."""
    return text if isinstance(text, Note) else Note(text, "other")


def note_detail(text: str) -> dict[str, Any]:
    """A note's JSON record: ``{text, topic, pools, level, priority}``."""
    n = as_note(text)
    return {"text": str(n), "topic": n.topic, "pools": list(n.pools), "level": n.level,
            "priority": n.priority}


def pool_names(entries: Iterable[Any]) -> set[str]:
    """The names by which notes refer to a fleet's pools: each entry's configuration and its
    pool key without the SLO tier (``1xRTX-4090@EU27~spot/300ms`` -> ``1xRTX-4090@EU27~spot``).
    ``entries``: records or dicts with ``config`` and ``pool`` (or ``label``)."""
    out: set[str] = set()
    for e in entries:
        get = e.get if isinstance(e, dict) else lambda k, e=e: getattr(e, k, None)
        for key in ("config", "pool", "label"):
            v = get(key)
            if isinstance(v, str):
                out.add(v)
                head, at, tail = v.partition("@")  # model/config@region/tier: the tier goes
                out.add(f"{head}{at}{tail.partition('/')[0]}" if at else v.partition("/")[0])
                if at and "/" in head:  # a plan of several models: its model/config too
                    out.add(head)
    return out


def concerns(note: str, pools: Collection[str]) -> bool:
    """The note is about the plan as a whole, or about one of ``pools``."""
    n = as_note(note)
    return not n.pools or any(p in pools for p in n.pools)


def headline(notes: Iterable[str], pools: Collection[str],
             limit: int = HEADLINE_LIMIT) -> list[Note]:
    """The notes a terminal shows by default: planner-level notes about ``pools`` (or the
    whole plan), by priority (ties in their order), at most ``limit``."""
    chosen = [n for n in map(as_note, notes) if n.level == PLAN and concerns(n, pools)]
    return sorted(chosen, key=lambda n: n.priority)[:limit]


class DatasheetBand(NamedTuple):
    """The range of the real P99 TTFT over an uncalibrated prediction (``lo``-``hi`` x) in 80%
    of held-out runs, and the page that judges the errors it comes from (``doc``)."""

    lo: float
    hi: float
    doc: str


def datasheet_band(model: str, gpu: str, *,
                   store: str | os.PathLike[str] | None = None,
                   moe: bool = False, mla: bool = False) -> DatasheetBand:
    """For an uncalibrated (spec-path) prediction of ``model`` on ``gpu``: the range of the real
    P99 TTFT over the predicted one in 80% of held-out runs (``data/spec_errors.json``, the fold
    of a model measured on other configurations of ``store``, a data context's, else the default
    store, or of one never measured; for a GPU type the store never measured, other people's
    runs; ``moe``: the model is a mixture of experts, which the store's folds never held
    out; ``mla``: one of multi-head latent attention, banded by such models' runs), as the
    notes and ``solve --confidence`` read it (``optimize/confidence.py``)."""
    from fleetplan.profiles.store import load_profiles
    from fleetplan.validate.bands import error_table

    fold = ("leave-one-config-out" if load_profiles(default=store).configs(model)
            else "leave-one-model-out")
    row = error_table().lookup(gpu, "ttft_p99_ms", fold, moe=moe, mla=mla)
    return DatasheetBand(*row.quantiles.measured_range(), row.doc)


def print_notes(print_line: Any, notes: Iterable[str], pools: Collection[str], *,
                verbose: bool) -> None:
    """Print ``note: ...`` lines through ``print_line``: every note with ``verbose``, else the
    :func:`headline` and one line saying how many more there are and where."""
    notes = list(notes)
    shown: list[str] = list(notes) if verbose else list(headline(notes, pools))
    for n in shown:
        print_line(f"note: {n}")
    left = [as_note(n) for n in notes if not any(n is m for m in shown)]
    if left:
        about = sum(n.level == PLAN and concerns(n, pools) for n in left)
        what = f"{len(left)} more note{'s' * (len(left) > 1)}" + (
            f", {about} of them about these pools" if about else "")
        print_line(f"({what}; --verbose prints them, --format json has them all)")
