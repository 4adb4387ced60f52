"""A user catalog's tables, however broken, are refused in one line naming file, row, column and
value, never a traceback (issue 16); their size is bounded before they are parsed."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetplan.catalog import Catalog, _tables
from fleetplan.errors import FleetplanError

HEADER = ["gpu", "vram_gb", "tdp_w", "fp16_tflops_dense", "mem_bandwidth_gb_s",
          "interconnect_gb_s"]
GOOD = ["L4", "24", "72", "121", "300", "32"]
# cells a broken row may hold: empty, text, non-finite, zero, negative, huge, quotes, commas
CELLS = st.sampled_from(["", " ", "abc", "nan", "inf", "-inf", "0", "-3", "1e400", "1e308",
                         "1_000", "\"", "\"a,b\"", "\u0661", "L4", "24", "\\N", "NA",
                         "x" * 300])


def _broken_rows(draw: st.DrawFn) -> list[list[str]]:
    rows = []
    for _ in range(draw(st.integers(1, 4))):
        row = list(GOOD)
        for k in draw(st.sets(st.integers(0, len(HEADER) - 1), min_size=1)):
            row[k] = draw(CELLS)
        if draw(st.booleans()):  # a ragged row: cells missing or extra
            row = row[:draw(st.integers(0, len(row)))] + draw(st.lists(CELLS, max_size=2))
        rows.append(row)
    return rows


def _check(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "gpus.csv").write_text(text, encoding="utf-8")
        try:
            gpus = Catalog(folder).gpus()
        except FleetplanError as exc:
            msg = str(exc)
            assert "\n" not in msg and str(folder / "gpus.csv") in msg, msg
            assert len(msg) < 600, msg
            return
        assert gpus  # accepted: every row it took is a valid spec (validated on the way)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.composite(_broken_rows)())
def test_a_user_gpus_csv_with_broken_rows_never_gives_a_traceback(rows: list[list[str]]) -> None:
    _check("\n".join(",".join(r) for r in [HEADER, GOOD, *rows]) + "\n")


@pytest.mark.parametrize("cell, column, shown", [
    ("", "gpu", "''"), ("abc", "vram_gb", "'abc'"), ("0", "tdp_w", "0"),
    ("inf", "fp16_tflops_dense", "inf")])
def test_a_bad_cell_is_named_by_file_row_column_and_value(tmp_path: Path, cell: str,
                                                          column: str, shown: str) -> None:
    row = list(GOOD)
    row[HEADER.index(column)] = cell
    (tmp_path / "gpus.csv").write_text(",".join(HEADER) + "\n" + ",".join(GOOD) + "\n"
                                       + ",".join(row) + "\n")
    with pytest.raises(FleetplanError) as err:
        Catalog(tmp_path).gpus()
    msg = str(err.value)
    assert f"{tmp_path / 'gpus.csv'}: row 3, column {column}: {shown} " in msg, msg


@pytest.mark.parametrize("table, text", [
    ("gpu_aliases.csv", "alias,gpu\n123,H100-PCIe\n,H100-PCIe\n"),
    ("prices.csv", "gpu,market,price_usd_per_gpu_hour\nH100-PCIe,,2.0\n"),
    ("grid_intensity.csv", "region,g_co2_per_kwh\n,100\n"),
    ("models.csv", "model,hf_id\nx,\n"),
    ("grid_intensity.csv", "region,g_co2_per_kwh\nXX,-5\n"),  # (was a pydantic traceback)
    ("models.csv", "model,hf_id,architecture,params_b,layers,hidden_size,intermediate_size,"
     "attention_heads,kv_heads,head_dim,vocab_size,context_length,served_dtype,"
     "weight_bytes_per_param,source\nx,a/x,Qwen2,1.5,2.5,1536,8960,12,2,128,151936,131072,"
     "float16,2,s\n"),  # 2.5 layers (was read as 2)
])
def test_other_user_tables_refuse_an_empty_required_cell_in_one_line(tmp_path: Path, table: str,
                                                                     text: str) -> None:
    (tmp_path / table).write_text(text)
    cat = Catalog(tmp_path)
    with pytest.raises(FleetplanError) as err:
        cat.aliases(), cat.prices(), cat.grid(), cat.models()
    msg = str(err.value)
    assert "\n" not in msg and str(tmp_path / table) in msg, msg


def test_a_catalog_table_larger_than_the_limit_is_refused_before_parsing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_tables, "MAX_TABLE_BYTES", 1000)
    (tmp_path / "gpus.csv").write_text(",".join(HEADER) + "\n" + (",".join(GOOD) + "\n") * 100)
    with pytest.raises(FleetplanError, match="more than the 1000"):
        Catalog(tmp_path).gpus()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_as_a_table_is_refused_by_its_type(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "gpus.csv")  # (a catalog folder skips it: not a file)
    with pytest.raises(FleetplanError, match="FIFO"):
        _tables.read_checked_csv(tmp_path / "gpus.csv", required=["gpu"])
