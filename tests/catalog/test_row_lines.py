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


@pytest.mark.parametrize("command", ["solve", "simulate"])
def test_a_bad_user_table_is_refused_as_itself_not_as_a_scenario_field(
        tmp_path: Path, cli, command: str) -> None:
    # a power figure beyond any card in the user's gpus.csv: the refusal names that file, row
    # and column, not the scenario's fleet that happens to name the GPU first
    folder = _user_gpus(tmp_path, _h100_row().replace(",80,350,", ",80,1e300,", 1) + "\n")
    example = Path(__file__).resolve().parents[2] / "examples" / "hybrid-chat-batch.yaml"
    res = cli(command, str(example), "--catalog", str(folder))
    assert res.exit_code == 2
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"fleetplan: error: {folder / 'gpus.csv'}: row 2, column tdp_w: ")
