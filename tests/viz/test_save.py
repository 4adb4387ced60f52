"""Saving plots: PNG or SVG by suffix, atomic, byte-identical for the same plot."""

from __future__ import annotations

from pathlib import Path

import pytest

import fleetplan
from fleetplan.errors import InputError
from fleetplan.viz import plot_scaling, save_figure
from fleetplan.viz.style import label_for


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml")])
def test_save_is_deterministic(tmp_path: Path, suffix: str, magic: bytes) -> None:
    store = fleetplan.load_profiles()
    paths = []
    for i in range(2):
        ax = plot_scaling(store, model="DeepSeek-R1-Distill-Qwen-14B")
        paths.append(save_figure(ax, tmp_path / f"p{i}{suffix}"))
    data = [p.read_bytes() for p in paths]
    assert data[0].startswith(magic) and data[0] == data[1]
    assert sorted(x.name for x in tmp_path.iterdir()) == [f"p0{suffix}", f"p1{suffix}"]


def test_save_refuses_other_types(tmp_path: Path) -> None:
    ax = plot_scaling([{"config": "1xA", "request_rate": 1.0, "request_throughput": 1.0}])
    with pytest.raises(InputError, match=r"unsupported image type '\.pdf'.*\.png, \.svg"):
        save_figure(ax, tmp_path / "x.pdf")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("column, label", [
    ("ttft_p99_ms", "P99 TTFT (ms)"), ("tpot_mean_ms", "mean TPOT (ms)"),
    ("e2e_p50_ms", "P50 E2E latency (ms)"), ("cost_per_mtok_usd", "cost (USD per 1M tokens)"),
])
def test_labels_carry_units(column: str, label: str) -> None:
    assert label_for(column) == label
