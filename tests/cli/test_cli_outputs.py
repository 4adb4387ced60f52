"""No command writes over a file it reads, or writes two of its outputs to one file: the run is
refused before any work with one line naming the option and both roles, and every file stays as
it was."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "hybrid-chat-batch.yaml"


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize("args,words", [
    (["solve", "{s}", "--out", "{s}"], "--out {s}: is the scenario {s}"),
    (["solve", "{s}", "--save-lp", "{s}"], "--save-lp {s}: is the scenario {s}"),
    (["solve", "{s}", "--out", "{d}/p.json", "--save-lp", "{d}/p.json"],
     "--save-lp {d}/p.json: also named by --out"),
    (["solve", "{s}", "--out", "{d}/p.lp.json", "--save-lp", "{d}/p.lp"],  # its side file
     "--save-lp {d}/p.lp.json: also named by --out"),
    (["solve", "{s}", "--report", "{d}/r.html", "--out", "{d}/r.html"],
     "also named by"),
    (["solve", "{s}", "--out", "{d}/link.yaml"], "is the scenario"),  # a link to the scenario
    (["simulate", "{s}", "--plan", "{d}/plan.png", "--plot", "{d}/plan.png"],
     "--plot {d}/plan.png: is the --plan {d}/plan.png"),
    (["calibrate", "--store", "{d}/store.csv", "--out", "{d}/store.csv"],
     "--out {d}/store.csv: is the --store {d}/store.csv"),
    (["report", "{d}/plan.html", "-o", "{d}/plan.html"],
     "--out {d}/plan.html: is the plan {d}/plan.html"),
    (["report", "{d}/plan.html"], "--out {d}/plan.html: is the plan"),  # the default name
])
def test_an_output_that_names_an_input_or_another_output_is_refused_before_any_work(
        cli, tmp_path, args, words) -> None:
    s = tmp_path / "s.yaml"
    shutil.copy(EXAMPLE, s)
    (tmp_path / "plan.png").write_text("{}")
    (tmp_path / "plan.html").write_text("{}")
    (tmp_path / "store.csv").write_text("model,config\n")
    os.symlink(s, tmp_path / "link.yaml")
    before = _digest(tmp_path)
    fill = {"s": str(s), "d": str(tmp_path)}
    r = cli(*(a.format(**fill) for a in args))
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words.format(**fill) in lines[0], r.stderr
    assert _digest(tmp_path) == before  # nothing written, nothing replaced
