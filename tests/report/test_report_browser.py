"""The report of the bundled example, opened in headless Chromium (Debian's ``chromium``;
``.ci/run`` installs it): the page has its title, the fleet table and one SVG per figure, logs
no console message, and a screenshot is saved as a test artefact (its path is printed).

Chromium is driven through its own command line (``--dump-dom``, ``--screenshot``,
``--enable-logging=stderr``): no browser-automation dependency.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from report_helpers import EXAMPLE, EXAMPLE_PLAN, Page

from fleetplan.report import load_plan
from fleetplan.report.render import write_report
from fleetplan.scenario import load_scenario

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CONSOLE = re.compile(r":CONSOLE(?:\(\d+\))?[:\]]|console\.(error|warn)", re.I)


def _browser() -> str:
    env = os.environ.get("FLEETPLAN_CHROMIUM")
    found = env or next((p for b in BROWSERS if (p := shutil.which(b))), None)
    if not found:
        pytest.skip("headless Chromium not found (install Debian's chromium package: "
                    "apt-get install -y chromium; .ci/run does, or set FLEETPLAN_CHROMIUM)")
    return found


def _chromium(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-extensions", "--disable-background-networking", "--hide-scrollbars",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOME": str(profile)})


def _console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if CONSOLE.search(line)]


@pytest.fixture(scope="module")
def browser() -> str:
    return _browser()


def test_the_bundled_examples_report_in_chromium(browser: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    page_file = write_report(tmp_path / "hybrid-chat-batch.html", load_plan(EXAMPLE_PLAN),
                             scenario=load_scenario(EXAMPLE), scenario_path=str(EXAMPLE))
    url = page_file.resolve().as_uri()
    dom = _chromium(browser, tmp_path / "profile", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert _console_lines(dom.stderr) == []
    page = Page(dom.stdout)  # the DOM as the browser built it
    plan = load_plan(EXAMPLE_PLAN)
    assert page.title == f"Fleet plan: {plan.fleet_label()}, ${plan.cost_per_hour_usd:.2f}/h"
    assert [r[0] for r in page.rows("fleet-table")] == [p.pool for p in plan.fleet]
    assert page.figures == ["figure-fleet", "figure-latency"]
    assert page.svgs == len(page.figures)
    shot = tmp_path / "hybrid-chat-batch.png"
    res = _chromium(browser, tmp_path / "profile", f"--screenshot={shot}",
                    "--window-size=1280,4000", url)
    assert res.returncode == 0, res.stderr[-2000:]
    assert _console_lines(res.stderr) == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    with capsys.disabled():
        print(f"\nreport screenshot: {shot}")


def test_the_console_check_sees_a_page_that_logs(browser: str, tmp_path: Path) -> None:
    page = tmp_path / "noisy.html"
    page.write_text("<!DOCTYPE html><html><head><title>t</title></head><body>"
                    "<script>console.error('boom')</script></body></html>", encoding="utf-8")
    res = _chromium(browser, tmp_path / "profile", "--dump-dom", page.resolve().as_uri())
    assert any("boom" in line for line in _console_lines(res.stderr)), res.stderr[-2000:]
