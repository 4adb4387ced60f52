"""Every plot draws the names it is given as written (#43 item 1: not as mathtext) and survives
the characters text layout cannot take (#43 item 2: a lone surrogate crashed matplotlib; each such
character is drawn as U+FFFD). The SVG is read back (svg.fonttype none writes text as text)."""

from __future__ import annotations

import html
import re
from typing import Any

import matplotlib.pyplot as plt
import pytest

from fleetplan.viz import (
    plot_class_latency,
    plot_fleet_composition,
    plot_frontier,
    plot_hourly_plan,
    plot_latency_vs_rate,
    plot_scaling,
)
from fleetplan.viz.style import figure_bytes, offscreen_axes
from fleetplan.viz.text import plot_text, safe_text

MATH = "$x^{2}$"
BROKEN = "$\\frac"


def _texts(ax: Any) -> list[str]:
    svg = figure_bytes(ax, "svg").decode("utf-8")
    return [html.unescape(re.sub(r"<[^>]+>", "", m))
            for m in re.findall(r"<text\b[^>]*>(.*?)</text>", svg, flags=re.S)]


def _draws(name: str) -> dict[str, Any]:
    """One plot per function, with ``name`` where that plot shows a user's name."""
    cls = [{"name": name, "ttft_p99_ms": 100.0, "slo_ttft_p99_ms": 150.0, "met": True}]
    fleet = [{"pool": name, "config": "1xH100-PCIe", "region": "EU27", "count": 2}]
    hours = [{"hour": h, "rate_rps": 3.0, "met": True, "cost_per_hour_usd": 2.0,
              "g_co2_per_hour": 1.0,
              "fleet": [{"config": name, "region": "EU27", "count": 1}]} for h in (0, 1)]
    points = [{"g_co2_per_mtok": 10.0 + i, "cost_per_hour_usd": 5.0 - i, "label": name}
              for i in range(2)]
    runs = [{"model": "m", "config": name, "request_rate": r, "request_throughput": r * 0.9,
             "ttft_p99_ms": 50.0 * r} for r in (1.0, 2.0)]
    return {
        "class": lambda ax: plot_class_latency(cls, ax=ax),
        "fleet": lambda ax: plot_fleet_composition(fleet, ax=ax),
        "hours": lambda ax: plot_hourly_plan(hours, ax=ax),
        "frontier": lambda ax: plot_frontier(points, ax=ax, annotate=True),
        "scaling": lambda ax: plot_scaling(runs, ax=ax),
        "latency": lambda ax: plot_latency_vs_rate(runs, ax=ax),
    }


@pytest.mark.parametrize("kind", list(_draws("x")))
@pytest.mark.parametrize("name", [MATH, BROKEN, "a $1 b $2"])
def test_every_plot_draws_a_name_as_written(kind: str, name: str) -> None:
    texts = _texts(_draws(name)[kind](offscreen_axes()))
    assert any(name in t for t in texts), texts


@pytest.mark.parametrize("kind", list(_draws("x")))
def test_every_plot_survives_a_lone_surrogate(kind: str) -> None:
    texts = _texts(_draws("gpu\ud800\x07")[kind](offscreen_axes()))
    assert any("gpu\ufffd\ufffd" in t for t in texts), texts


def test_a_plans_cost_caption_keeps_its_dollar_signs() -> None:
    plan = {"fleet": [{"config": "1xH100-PCIe", "region": "EU27", "count": 2}],
            "cost_per_hour_usd": 4.0, "g_co2_per_mtok": 3.5,
            "classes": [{"name": "chat $3.50", "ttft_p99_ms": 90.0, "slo_ttft_p99_ms": 150.0,
                         "met": True}]}
    texts = _texts(plot_class_latency(plan, ax=offscreen_axes()))
    assert any("fleet 2x1xH100-PCIe: $4.00/h" in t for t in texts), texts
    assert "chat $3.50" in texts


def test_texts_already_on_a_given_axes_are_left_alone() -> None:
    # a notebook user's own mathtext title on the axes stays math (drawn as glyph paths)
    fig, ax = plt.subplots()
    mine = ax.text(0.5, 0.5, "$\\alpha$")
    plot_class_latency([{"name": "c", "ttft_p99_ms": 1.0}], ax=ax)
    assert mine.get_text() == "$\\alpha$"


def test_log_axis_ticks_keep_matplotlibs_own_notation() -> None:
    # escaping names, not turning mathtext off: a log axis's 10^2 ticks are still math
    runs = [{"model": "m", "config": "c", "request_rate": r, "request_throughput": r,
             "ttft_p99_ms": 10.0 ** r} for r in (1.0, 2.0, 3.0, 4.0)]
    texts = _texts(plot_latency_vs_rate(runs, ax=offscreen_axes()))
    assert not any("mathdefault" in t for t in texts), texts


def test_sanitizers() -> None:
    assert safe_text("a\x00b\ud800c\ufffe\U0010ffff\t\n\r") == "a\ufffdb\ufffdc\ufffd\ufffd\t\n\r"
    assert safe_text(safe_text("\x07")) == "\ufffd"
    assert plot_text("$1 and \\$2") == "\\$1 and \\\\$2"
