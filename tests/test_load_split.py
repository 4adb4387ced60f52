"""The bounded loader is split by concept (house rule: ~100-400 lines a module) and its public
names stay importable from ``fleetplan._load`` (a contract for the readers that use it)."""

from __future__ import annotations

import importlib
from pathlib import Path

import fleetplan

PUBLIC = {"MAX_ALIASES", "MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "check_regular_file",
          "load_data", "load_json", "load_yaml", "read_bytes_bounded", "read_text_bounded",
          "show_value"}
MODULES = ("_load", "_input", "_json_load", "_yaml_load", "_show")


def test_every_public_name_of_the_loader_is_importable_from_fleetplan_load() -> None:
    load = importlib.import_module("fleetplan._load")
    assert set(load.__all__) >= PUBLIC
    for name in PUBLIC:
        assert getattr(load, name) is not None, name
    assert load.MAX_DEPTH == 64 and load.MAX_BYTES == 16 * 1024 * 1024  # the documented limits


def test_each_loader_module_is_one_concept_of_at_most_400_lines() -> None:
    root = Path(fleetplan.__file__).parent
    for name in MODULES:
        lines = (root / f"{name}.py").read_text().count("\n")
        assert lines <= 400, f"{name}.py: {lines} lines"
