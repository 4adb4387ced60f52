"""Helpers of the report tests: where the example and its plan files are, the older plan shape
rewritten in the issue-10 contract, catalog facts read without fleetplan, a reader's view of a
page (:class:`Page`) with a strict HTML check (:func:`assert_valid_html`; both:
:func:`valid_page`), and a small solved plan built from the optimizer's records
(:func:`sample_plan`)."""

from __future__ import annotations

import copy
import csv
from pathlib import Path
from typing import Any

from fleetplan.optimize.plan import (
    CapacityNote,
    ClassResult,
    FleetEntry,
    Plan,
    PlanStatus,
    SolverReport,
)
from fleetplan.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
EXAMPLE = ROOT / "examples" / "hybrid-chat-batch.yaml"
EXAMPLE_SCENARIO = load_scenario(EXAMPLE)  # the bundled example, loaded once for every test
EXAMPLE_PLAN = DATA / "hybrid-chat-batch.plan.json"  # pools per SLO tier (issue 10)
LEGACY_PLAN = DATA / "hybrid-chat-batch.v1.plan.json"  # one pool per (config, region)
SOLVER = SolverReport(name="CBC", status="optimal", seconds=None, gap=0.01, rounds=1,
                      time_limit_s=10.0)


def sample_plan(**kw: Any) -> Plan:
    """Two classes on 1xH100-PCIe in EU27 and 2xRTX-4090 in FRA (one pool per configuration and
    region, split by configuration), optimal and verified; ``kw`` replaces fields."""
    base: dict[str, Any] = dict(
        status=PlanStatus.optimal,
        fleet=(FleetEntry("1xH100-PCIe", 2, "EU27"), FleetEntry("2xRTX-4090", 3, "FRA")),
        cost_per_hour_usd=5.5, cost_per_mtok_usd=0.2, g_co2_per_mtok=30.0,
        classes=(ClassResult("chat", 4.0, 150.0, 101.0, True, {"1xH100-PCIe": 1.0},
                             ttft_p99_ci_ms=(90.0, 110.0)),
                 ClassResult("batch", 6.0, 2000.0, 900.0, True,
                             {"1xH100-PCIe": 0.25, "2xRTX-4090": 0.75})),
        solver=SOLVER, verified=True, g_co2_per_hour=900.0,
        capacities=(CapacityNote("chat", "1xH100-PCIe", 150.0, 12.9, 1.0, "replica model"),))
    base.update(kw)
    return Plan(**base)


def tiered(legacy: dict) -> dict:
    """A one-pool-per-(config, region) plan rewritten in the issue-10 contract: ``fleet[]`` with
    ``pool`` and ``tier_ttft_p99_ms``, ``split`` keyed by pool, ``capacities[]`` naming pools."""
    d = copy.deepcopy(legacy)
    tiers = {c["config"]: c["tier_ttft_p99_ms"] for c in d["capacities"]}
    names = {}
    for e in d["fleet"]:
        e["tier_ttft_p99_ms"] = tiers[e["config"]]
        e["pool"] = f"{e['config']}@{e['region']}/{tiers[e['config']]:g}ms"
        names[e["config"]] = e["pool"]
    for c in d["classes"]:
        c["split"] = {names[k]: v for k, v in c["split"].items()}
    for c in d["capacities"]:
        c["pool"] = names[c["config"]]
        c["region"] = "EU27"
        c["ttft_p99_ms_at_capacity"] = 138.0 if c["config"] == "1xH100-PCIe" else 1796.0
    return d


def catalog_price(gpu: str, market: str = "alternative") -> tuple[float, str]:
    """(price per GPU-hour, date) from data/prices.csv, read here, not through fleetplan."""
    with open(ROOT / "data" / "prices.csv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if row["gpu"] == gpu and row["market"] == market:
                return float(row["price_usd_per_gpu_hour"]), row["price_date"]
    raise KeyError(gpu)


def catalog_embodied_kg(gpu: str) -> float:
    with open(ROOT / "data" / "gpus.csv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if row["gpu"] == gpu:
                return float(row["embodied_kg_co2e"])
    raise KeyError(gpu)


class Page:
    """What a reader sees in a page: its title, its tables (by id: rows of cell texts), its
    inline SVGs and figures, every id (to find duplicates), and every external reference."""

    def __init__(self, html: str) -> None:
        from html.parser import HTMLParser

        page = self
        self.title = ""
        self.tables: dict[str, list[list[str]]] = {}
        self.ids: list[str] = []
        self.svgs = 0
        self.figures: list[str] = []
        self.refs: list[str] = []  # src=, href= to anything but a fragment, <link>, <script>
        self.text = ""

        class _P(HTMLParser):
            def __init__(self) -> None:
                super().__init__(convert_charrefs=True)
                self.stack: list[str] = []
                self.table: str | None = None
                self.row: list[str] | None = None
                self.cell: list[str] | None = None
                self.in_title = False
                self.in_svg = 0

            def handle_starttag(self, tag, attrs):
                a = dict(attrs)
                if "id" in a:
                    page.ids.append(a["id"])
                for k in ("src", "href", "xlink:href"):
                    if k in a and not str(a[k]).startswith("#"):
                        page.refs.append(f"{tag} {k}={a[k]}")
                if tag in ("script", "link", "iframe", "img", "object", "embed"):
                    page.refs.append(tag)
                if tag == "svg":
                    page.svgs += 1
                    self.in_svg += 1
                elif tag == "figure":
                    page.figures.append(a.get("id", ""))
                elif tag == "title" and not self.in_svg:
                    self.in_title = True
                elif tag == "table" and a.get("id"):
                    self.table = a["id"]
                    page.tables[self.table] = []
                elif tag == "tr" and self.table:
                    self.row = []
                elif tag in ("td", "th") and self.row is not None:
                    self.cell = []

            def handle_endtag(self, tag):
                if tag == "svg":
                    self.in_svg -= 1
                elif tag == "title":
                    self.in_title = False
                elif tag in ("td", "th") and self.cell is not None and self.row is not None:
                    self.row.append(" ".join("".join(self.cell).split()))
                    self.cell = None
                elif tag == "tr" and self.row is not None and self.table:
                    page.tables[self.table].append(self.row)
                    self.row = None
                elif tag == "table":
                    self.table = None

            def handle_data(self, data):
                if self.in_title:
                    page.title += data
                if self.cell is not None:
                    self.cell.append(data)
                if not self.in_svg:
                    page.text += data

        _P().feed(html)
        self.text = " ".join(self.text.split())

    def rows(self, table: str) -> list[list[str]]:
        """Body rows (the header row and a footer 'total' row left out)."""
        rows = self.tables[table]
        return [r for r in rows[1:] if r and r[0] != "total"]


def assert_valid_html(html: str) -> None:
    """A strict HTML5 parse (html5lib) finds no error, and no id repeats."""
    import html5lib

    parser = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False)
    parser.parse(html)  # raises html5lib.html5parser.ParseError on the first error
    ids = Page(html).ids
    dup = sorted({i for i in ids if ids.count(i) > 1})
    assert not dup, f"repeated ids: {dup[:5]}"


def valid_page(html: str) -> Page:
    """The page as a reader sees it, once :func:`assert_valid_html` has found it valid."""
    assert_valid_html(html)
    return Page(html)
