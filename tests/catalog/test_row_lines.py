"""A refused catalog row is named by the line the user sees in an editor: blank lines and cells
quoted over several lines count, as they do in the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetplan.catalog import Catalog
from fleetplan.catalog._tables import data_lines
from fleetplan.errors import DataError

DATA = Path(__file__).resolve().parents[2] / "data"


def _h100_row() -> str:
    return next(line for line in (DATA / "gpus.csv").read_text().splitlines()
                if line.startswith("H100-PCIe,"))


def _user_gpus(tmp_path: Path, body: str) -> Path:
    header = (DATA / "gpus.csv").read_text().splitlines()[0]
    folder = tmp_path / "cat"
    folder.mkdir()
    (folder / "gpus.csv").write_text(header + "\n" + body, encoding="utf-8")
    return folder


def test_a_bad_value_after_blank_lines_is_named_by_its_line(tmp_path: Path) -> None:
    bad = _h100_row().replace("H100-PCIe,NVIDIA H100 PCIe,80,", "My-GPU,Mine,abc,", 1)
    folder = _user_gpus(tmp_path, "\n\n" + bad + "\n")  # header, two blank lines, line 4
    with pytest.raises(DataError, match=r"gpus\.csv: row 4, column vram_gb: 'abc'"):
        Catalog(folder).gpus()


def test_a_duplicate_is_named_by_both_lines(tmp_path: Path) -> None:
    row = _h100_row()
    folder = _user_gpus(tmp_path, row + "\n\n\n" + row + "\n")  # lines 2 and 5
    with pytest.raises(DataError, match=r"rows 2 and 5: the same gpu 'H100-PCIe' twice"):
        Catalog(folder).gpus()


def test_lines_count_quoted_cells_over_several_lines() -> None:
    text = 'a,b\n1,"two\nlines"\n\n3,4\n'
    assert data_lines(text) == [2, 5]
