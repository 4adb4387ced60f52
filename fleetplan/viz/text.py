"""What text may reach a page or a plot: the one sanitizer of each surface.

Names come from users (a scenario's class names, a plan file's pools and regions, a catalog's
GPUs) and are free text. Two things go wrong when they are drawn or written as they are:

- characters that HTML and XML cannot carry (NUL and the other C0/C1 controls, lone surrogates,
  which JSON allows as ``\\ud800``, and the noncharacters such as U+FFFE) make the page invalid
  and crash matplotlib's text layout. :func:`safe_text` replaces each with U+FFFD, the same on
  every surface (the report's Jinja2 ``finalize``, the plots, the SVG's accessible name), so a
  reader sees one mark where the file had an unprintable character; tab, newline and carriage
  return are kept.
- matplotlib parses any text holding two unescaped ``$`` as mathtext: ``$x^{2}$`` is drawn as
  x squared and ``$\\frac`` is a parse error with no figure (our own titles hold dollar amounts
  too). Each text a plot creates has its own ``parse_math`` turned off (not the rcParam: the
  mathtext matplotlib's own tick formatters emit on log axes, ``10^2``, must stay math). Tick
  labels are made again at draw time from the axis's formatter, with the rcParam's
  ``parse_math``: fixed labels (names) are escaped in the formatter instead
  (:func:`plot_text`, every ``$`` as ``\\$``, which matplotlib draws as a plain ``$``).

:func:`plain_plot` does both for every text a plot function created (titles, labels,
annotations, legend entries, fixed tick labels), so each plot of :mod:`fleetplan.viz` is covered
in one place; :func:`safe_figure_texts` (run by :func:`fleetplan.viz.style.figure_bytes`) makes
the characters of any figure safe before it is saved.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, TypeVar

REPLACEMENT = "\ufffd"

# C0 controls but tab, newline and CR; DEL and the C1 controls; surrogates (lone ones: a str
# holding a well-formed pair has none); the noncharacters U+FDD0..U+FDEF and U+xFFFE/U+xFFFF of
# every plane. HTML calls each a parse error; XML 1.0 (standalone SVG) refuses the controls.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufdd0-\ufdef"
    + "".join(f"{chr(p * 0x10000 + 0xFFFE)}{chr(p * 0x10000 + 0xFFFF)}" for p in range(17))
    + "]")

F = TypeVar("F", bound=Callable[..., Any])


def safe_text(s: str) -> str:
    """``s`` with every character HTML or XML cannot carry replaced by U+FFFD (idempotent)."""
    return _UNSAFE.sub(REPLACEMENT, s)


def is_safe_text(s: str) -> bool:
    """Whether ``s`` holds no character :func:`safe_text` would replace."""
    return _UNSAFE.search(s) is None


def plot_text(s: str) -> str:
    """``s`` as matplotlib should be given it to draw it as written: safe characters, every
    ``$`` escaped (not idempotent: apply once, to the text as the user wrote it)."""
    return safe_text(s).replace("$", "\\$")


def _texts(fig: Any) -> list[Any]:
    from matplotlib.text import Text

    return list(fig.findobj(Text))


def _fixed_labels(fig: Any) -> list[tuple[Any, bool, Any]]:
    """(axis, major, formatter) of every axis whose ticks sit at fixed places with labels given
    as text (``set_xticks(x, labels)``): those labels are re-applied to the tick texts, created
    at draw time, from the formatter; a text pass alone would not reach them."""
    from matplotlib.ticker import FixedFormatter, FixedLocator, FuncFormatter

    out = []
    for a in fig.get_axes():
        for axis in (a.xaxis, a.yaxis):
            for major in (True, False):
                loc = axis.get_major_locator() if major else axis.get_minor_locator()
                fmt = axis.get_major_formatter() if major else axis.get_minor_formatter()
                if isinstance(loc, FixedLocator) and isinstance(fmt, FixedFormatter
                                                                | FuncFormatter):
                    out.append((axis, major, fmt))
    return out


def _relabel(axis: Any, major: bool, fmt: Any, clean: Callable[[str], str]) -> None:
    """The axis's fixed tick labels passed through ``clean``, kept per location."""
    from matplotlib.ticker import FuncFormatter

    loc = axis.get_major_locator() if major else axis.get_minor_locator()
    locs = list(loc.locs)
    labels = {x: clean(str(s)) for x, s in zip(locs, fmt.format_ticks(locs), strict=True)}
    new = FuncFormatter(lambda x, _pos: labels.get(x, ""))
    if major:
        axis.set_major_formatter(new)
    else:
        axis.set_minor_formatter(new)


def _tick_texts(fig: Any) -> set[int]:
    """ids of the tick label texts of ``fig`` (their text comes from the axis's formatter)."""
    out: set[int] = set()
    for a in fig.get_axes():
        for axis in (a.xaxis, a.yaxis):
            out.add(id(axis.offsetText))
            for tick in (*axis.majorTicks, *axis.minorTicks):
                out.update((id(tick.label1), id(tick.label2)))
    return out


def plain_plot(fn: F) -> F:
    """Decorate a plot function (``ax=`` keyword, returns the Axes) so that every text it
    created is drawn as written: safe characters (:func:`safe_text`), no mathtext (each text's
    own ``parse_math`` off, so ``get_text()`` still returns it as given); fixed tick labels
    (names) escaped in their formatter (:func:`plot_text`), which re-applies them to ticks
    however late they are made; numeric ticks untouched. Texts already on a given ``ax`` are
    left alone."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = kwargs.get("ax")
        before: set[int] = set()
        if given is not None:
            fig0 = given.get_figure(root=True)
            before = {id(t) for t in _texts(fig0)} | {id(f) for _, _, f in _fixed_labels(fig0)}
        ax = fn(*args, **kwargs)
        fig = ax.get_figure(root=True)
        ticks = _tick_texts(fig)
        for t in _texts(fig):
            if id(t) in before:
                continue
            text = t.get_text()
            if isinstance(text, str) and not is_safe_text(text):
                t.set_text(safe_text(text))
            if id(t) not in ticks:
                t.set_parse_math(False)
        for axis, major, f in _fixed_labels(fig):
            if id(f) not in before:
                _relabel(axis, major, f, plot_text)
        return ax

    return wrapper  # type: ignore[return-value]


def safe_figure_texts(fig: Any) -> None:
    """Replace, in every text of ``fig``, the characters :func:`safe_text` replaces (before
    saving a figure drawn elsewhere: a lone surrogate would crash the renderer)."""
    for t in _texts(fig):
        text = t.get_text()
        if isinstance(text, str) and not is_safe_text(text):
            t.set_text(safe_text(text))
    for axis, major, f in _fixed_labels(fig):
        _relabel(axis, major, f, safe_text)
