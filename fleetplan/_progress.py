"""Progress of long library steps, reported to whoever asked; the library itself never prints.

A long function (``solve``, ``frontier``, ``calibrate_store``, the cross-validations) takes an
optional ``progress=`` keyword: any object with the three methods of :class:`Progress`. Steps
are named by a short human label (``"capacity searches"``, ``"round 2: MILP"``) and may have a
total (jobs, points, configurations, folds) or none (one indivisible solve). The default,
``None``, reports nothing. The CLI passes a rich progress bar on stderr (``fleetplan.cli``);
notebooks or services may pass their own.

Helpers for library code: :func:`step` (a ``with`` block around one step) and
:func:`tracked_map` (an executor map that advances a step as results arrive, using the
executor's ``imap`` when it has one).

Warnings (something was wrong and the library worked around it, e.g. cache entries that failed
validation and were recomputed) go through :func:`warn`: one line, to the reporter's ``note``
method when it has one, else to the ``fleetplan`` logger at level WARNING (with no logging set
up, Python writes that line to stderr; ``--quiet`` hides bars, not warnings).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")
R = TypeVar("R")


@runtime_checkable
class Progress(Protocol):
    """Receives the steps of a long call: ``start`` once, ``advance`` per unit done, ``finish``
    once (also when the step fails). ``name`` identifies the step across the three calls."""

    def start(self, name: str, total: int | None = None) -> None: ...

    def advance(self, name: str, amount: int = 1) -> None: ...

    def finish(self, name: str) -> None: ...


class NoProgress:
    """Reports nothing (the default)."""

    def start(self, name: str, total: int | None = None) -> None:
        pass

    def advance(self, name: str, amount: int = 1) -> None:
        pass

    def finish(self, name: str) -> None:
        pass


NO_PROGRESS = NoProgress()

LOGGER = logging.getLogger("fleetplan")


def warn(progress: Progress | None, message: str) -> None:
    """Report ``message`` (one line, starting ``fleetplan: warning:``) to ``progress``'s
    ``note`` method when it has one, else to the ``fleetplan`` logger (module docstring)."""
    line = "fleetplan: warning: " + " ".join(message.split())
    note = getattr(progress, "note", None)
    if callable(note):
        note(line)
    else:
        LOGGER.warning(line)


@contextmanager
def step(progress: Progress | None, name: str,
         total: int | None = None) -> Iterator[Callable[[int], None]]:
    """``with step(progress, "folds", 5) as advance: ... advance(1)``; finishes on exit."""
    p = progress if progress is not None else NO_PROGRESS

    def advance(amount: int = 1) -> None:
        p.advance(name, amount)

    p.start(name, total)
    try:
        yield advance
    except KeyboardInterrupt as exc:  # the innermost step names what Ctrl-C interrupted
        if not hasattr(exc, "fleetplan_step"):
            exc.fleetplan_step = name  # type: ignore[attr-defined]
        raise
    finally:
        p.finish(name)


def tracked_map(executor: Any, fn: Callable[[T], R], items: Sequence[T],
                progress: Progress | None, name: str) -> list[R]:
    """``executor.map(fn, items)`` (results in input order), reported as step ``name`` with one
    unit per item. Executors with ``imap`` (an iterator of results in input order) advance as
    results come in; others advance all at once at the end."""
    if progress is None:
        return list(executor.map(fn, items))
    items = list(items)
    with step(progress, name, len(items)) as advance:
        imap = getattr(executor, "imap", None)
        if imap is None:
            out = list(executor.map(fn, items))
            advance(len(out))
            return out
        out = []
        for r in imap(fn, items):
            out.append(r)
            advance(1)
        return out
