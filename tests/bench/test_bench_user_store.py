"""``bench --ingest`` without --store adds to the user's store, never to the bundled data/."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from bench_fake_server import Plan

from fleetplan.catalog import data_dir
from fleetplan.profiles.store import load_profiles


def test_bench_ingest_without_store_writes_the_user_store(fake_server: Any, cli: Any,
                                                          tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("FLEETPLAN_DATA_DIR", raising=False)
    bundled = data_dir() / "profiles.csv"
    before = hashlib.sha256(bundled.read_bytes()).hexdigest()
    n_bundled = len(load_profiles())
    srv = fake_server(lambda i, b: Plan(tokens=3, ttft_s=0.01, itl_s=0.002))
    res = cli("bench", "--endpoint", srv.url, "--model", "org/tiny-model", "--rate", "40",
              "--num-prompts", "4", "--input-len", "fixed:8", "--output-len", "3",
              "--power", "none", "--ingest", "--gpu", "H100-SXM", "--gpu-count", "1",
              "--catalog", str(Path(__file__).resolve().parents[1] / "data"
                               / "catalog-served-names"),  # a catalog naming tiny-model
              "--no-progress", "--format", "json")
    assert res.exit_code == 0, res.stderr
    target = tmp_path / "xdg" / "fleetplan" / "profiles.csv"
    assert f"1 run(s) added to {target}" in res.stderr
    assert hashlib.sha256(bundled.read_bytes()).hexdigest() == before
    assert len(load_profiles(target)) == n_bundled + 1  # the bundled runs plus the new one
