"""Names a user wrote (class names of a scenario, anything in a plan file) reach the page and its
plots as written: not parsed as mathtext (#43 item 1), and without characters HTML cannot carry
(#43 item 2: NUL, controls, U+FFFE, a lone surrogate, each shown as U+FFFD)."""

from __future__ import annotations

import copy
import html as htmllib
import json
import re

import pytest
from report_helpers import assert_valid_html

from fleetplan.report import render_report
from fleetplan.report.plan_file import plan_from_dict

MATH_NAMES = ["$x^{2}$", "$\\frac", "cost $4 to $5", "a\\$b$"]


def _renamed(plan: dict, old: str, new: str) -> dict:
    """The plan with the class ``old`` renamed ``new`` everywhere it is named."""
    d = copy.deepcopy(plan)
    for c in d["classes"]:
        if c["name"] == old:
            c["name"] = new
    for c in d.get("capacities", []):
        if c.get("class") == old:
            c["class"] = new
    return d


def _svg_texts(html: str) -> list[str]:
    """The text of every <text> element of the page's inline figures (svg.fonttype none: text
    is written as text), unescaped."""
    return [htmllib.unescape(re.sub(r"<[^>]+>", "", m))
            for m in re.findall(r"<text\b[^>]*>(.*?)</text>", html, flags=re.S)]


@pytest.mark.parametrize("name", MATH_NAMES)
def test_class_name_is_drawn_as_written_not_as_math(example_plan: dict, name: str) -> None:
    first = example_plan["classes"][0]["name"]
    html = render_report(plan_from_dict(_renamed(example_plan, first, name), "p.json"))
    assert_valid_html(html)
    texts = _svg_texts(html)
    # the latency figure's tick label is the name, character for character (math would draw
    # x^{2} as glyphs of its own, and a malformed one raised ParseSyntaxException)
    assert name in texts, texts


@pytest.mark.parametrize("bad", ["\x00", "\x07", "\x1b", "\ufffe", "\ud800", "\x85", "\ufdd0"])
def test_characters_html_cannot_carry_are_replaced(example_plan: dict, bad: str) -> None:
    name = f"chat{bad}x"
    first = example_plan["classes"][0]["name"]
    # a lone surrogate is legal JSON (\ud800): read it the way a file is read
    data = json.loads(json.dumps(_renamed(example_plan, first, name)))
    html = render_report(plan_from_dict(data, "p.json"))
    assert_valid_html(html)
    assert bad not in html
    assert "chat\ufffdx" in html  # in the page's tables
    assert "chat\ufffdx" in _svg_texts(html)  # and in the figure, the same mark


@pytest.mark.filterwarnings("ignore:Glyph .* missing from font:UserWarning")  # a tab
def test_html_safe_names_are_unchanged(example_plan: dict) -> None:
    name = "chat <b>&\"'\t\u00e9\U0001f600"
    first = example_plan["classes"][0]["name"]
    html = render_report(plan_from_dict(_renamed(example_plan, first, name), "p.json"))
    assert_valid_html(html)
    assert "<b>&" not in html  # escaped, not markup
    page_text = htmllib.unescape(html)
    assert name in page_text
