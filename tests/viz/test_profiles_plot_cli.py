"""``fleetplan profiles --plot FILE``: the scaling figure or latency vs rate, PNG or SVG."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

M14 = "DeepSeek-R1-Distill-Qwen-14B"


@pytest.mark.parametrize("name, magic", [("s.png", b"\x89PNG"), ("s.svg", b"<?xml")])
def test_plot_written_beside_the_json(cli, tmp_path: Path, name: str, magic: bytes) -> None:
    out = tmp_path / name
    r = cli("profiles", "--model", M14, "--plot", str(out), "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert out.read_bytes().startswith(magic)
    assert f"plot written to {out}" in r.stderr
    assert {row["model"] for row in json.loads(r.stdout)} == {M14}  # stdout stays pure JSON


def test_plot_kinds_differ_and_bad_kind_or_type_is_one_line(cli, tmp_path: Path) -> None:
    a, b = tmp_path / "a.svg", tmp_path / "b.svg"
    assert cli("profiles", "-m", M14, "--plot", str(a), "--format", "csv").exit_code == 0
    assert cli("profiles", "-m", M14, "--plot", str(b), "--plot-kind", "latency",
               "--format", "csv").exit_code == 0
    assert b"completed throughput (req/s)" in a.read_bytes()  # SVG keeps its text
    assert b"P99 TTFT (ms)" in b.read_bytes() and b"P99 TTFT" not in a.read_bytes()
    r = cli("profiles", "-m", M14, "--plot", str(tmp_path / "c.png"), "--plot-kind", "pie")
    assert r.exit_code == 2 and "--plot-kind 'pie'" in r.stderr and "scaling, latency" in r.stderr
    r = cli("profiles", "-m", M14, "--plot", str(tmp_path / "c.gif"))
    assert r.exit_code == 2 and "unsupported image type '.gif'" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.svg", "b.svg"]


def test_plot_of_several_models_asks_for_one(cli, tmp_path: Path) -> None:
    r = cli("profiles", "--plot", str(tmp_path / "all.png"), "--format", "csv")
    assert r.exit_code == 2
    assert "--model" in r.stderr and M14 in r.stderr and len(r.stderr.strip().splitlines()) == 1
