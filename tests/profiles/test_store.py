"""The profile store: schema check on load, lossless round trip, atomic save."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from fleetplan.errors import DataError, UnknownNameError
from fleetplan.profiles.schema import COLUMN_NAMES, schema_markdown
from fleetplan.profiles.store import load_profiles


def test_bundled_store_loads_with_every_column() -> None:
    store = load_profiles()
    assert list(store.frame.columns) == list(COLUMN_NAMES)
    assert len(store) >= 80
    assert store.frame["ttft_p99_ms"].notna().all()
    assert set(store.frame["engine_version"]) == {"0.8.5"}


def test_round_trip_is_lossless(tmp_path: Path) -> None:
    store = load_profiles()
    out = store.save(tmp_path / "copy.csv")
    again = load_profiles(out)
    assert again.frame.equals(store.frame)
    assert [r.model_dump() for r in again.runs()] == [r.model_dump() for r in store.runs()]
    # saving twice gives the same bytes (deterministic)
    first = out.read_bytes()
    again.save(out)
    assert out.read_bytes() == first


def _corrupt(tmp_path: Path, old: str, new: str) -> Path:
    text = load_profiles().to_csv()
    assert old in text
    bad = tmp_path / "bad.csv"
    bad.write_text(text.replace(old, new, 1))
    return bad


def test_missing_column_is_refused(tmp_path: Path) -> None:
    bad = _corrupt(tmp_path, "ttft_p99_ms", "ttft_p99")
    with pytest.raises(DataError, match=r"bad.csv: missing required column\(s\) ttft_p99_ms"):
        load_profiles(bad)


def test_non_finite_value_is_refused_with_line_and_column(tmp_path: Path) -> None:
    store = load_profiles()
    df = store.frame.copy()
    df.loc[3, "duration_s"] = float("nan")
    df["duration_s"] = df["duration_s"].astype(object)
    df.loc[3, "duration_s"] = "inf"
    bad = tmp_path / "bad.csv"
    df.to_csv(bad, index=False)
    with pytest.raises(DataError, match=r"line 5, column duration_s: 'inf' is not finite"):
        load_profiles(bad)


def test_negative_count_is_refused(tmp_path: Path) -> None:
    store = load_profiles()
    df = store.frame.copy()
    df.loc[0, "completed"] = -5
    bad = tmp_path / "bad.csv"
    df.to_csv(bad, index=False)
    with pytest.raises(DataError, match=r"line 2, column completed: -5"):
        load_profiles(bad)


def test_a_bad_row_after_blank_lines_is_named_by_its_line_in_the_file(tmp_path: Path) -> None:
    df = load_profiles().frame.copy()
    df.loc[0, "completed"] = -5
    lines = df.to_csv(index=False).splitlines()
    bad = tmp_path / "bad.csv"
    # the header, two blank lines, then the bad row: line 4 of the file, the third row read
    bad.write_text("\n".join([lines[0], "", "", *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line 4, column completed: -5"):
        load_profiles(bad)


def test_select_names_the_valid_choices() -> None:
    store = load_profiles()
    sub = store.select(model="DeepSeek-R1-Distill-Qwen-14B", config="2xRTX-4090")
    assert len(sub) == 4 and set(sub.frame["request_rate"]) == {1.0, 4.0, 16.0, 32.0}
    with pytest.raises(UnknownNameError, match="did you mean 2xRTX-4090"):
        store.select(config="2xRTX4090")


def test_schema_doc_lists_every_column() -> None:
    doc = schema_markdown()
    assert all(f"`{c}`" in doc for c in COLUMN_NAMES)


def test_schema_doc_is_generated_from_the_schema() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "profile-store.md").read_text()
    marker = "<!-- generated: fleetplan.profiles.schema.schema_markdown -->\n"
    assert doc.split(marker, 1)[1] == schema_markdown()


# --- issue 16: a store is read strictly --------------------------------------------------


@pytest.mark.parametrize(
    ("column", "value", "expect"),
    [
        ("completed", "1e30", "column completed: '1e30' is out of range"),
        ("gpu_count", "1.5", "column gpu_count: '1.5' is not a whole number"),
        ("partial", "yes", "column partial: 'yes' is not a boolean"),
        ("partial", "no", "column partial: 'no' is not a boolean"),
        ("duration_s", "1e300", "column duration_s: 1e+300 is out of range"),
    ],
)
def test_a_stored_value_outside_its_type_is_refused(tmp_path: Path, column: str, value: str,
                                                    expect: str) -> None:
    df = load_profiles().frame.astype(object)
    df.loc[1, column] = value
    bad = tmp_path / "bad.csv"
    df.to_csv(bad, index=False)
    with pytest.raises(DataError, match="bad.csv: line 3, " + re.escape(expect)):
        load_profiles(bad)


def test_stored_booleans_read_as_written(tmp_path: Path) -> None:
    df = load_profiles().frame.astype(object)
    df.loc[0, "partial"], df.loc[1, "partial"], df.loc[2, "partial"] = "true", "1", "False"
    path = tmp_path / "s.csv"
    df.to_csv(path, index=False)
    got = load_profiles(path).frame
    by_id = dict(zip(got["run_id"], got["partial"], strict=True))
    assert by_id[df.loc[0, "run_id"]] is True and by_id[df.loc[1, "run_id"]] is True
    assert by_id[df.loc[2, "run_id"]] is False and sum(got["partial"]) == 2


def test_a_run_stored_twice_is_refused(tmp_path: Path) -> None:
    df = load_profiles().frame
    twice = df.iloc[[0, 1, 0]]
    path = tmp_path / "dup.csv"
    twice.to_csv(path, index=False)
    with pytest.raises(DataError, match=r"line 4, column run_id: .* is already the run of line 2"):
        load_profiles(path)


def test_a_folder_or_fifo_as_store_is_one_line(tmp_path: Path, cli) -> None:
    res = cli("profiles", "--store", str(tmp_path))
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    assert f"{tmp_path}: a folder, not a profile store" in res.stderr
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "pipe.csv"
        os.mkfifo(fifo)
        res = cli("profiles", "--store", str(fifo))  # refused by type: never opened, no hang
        assert res.exit_code == 2 and "not a regular file" in res.stderr


def test_ingest_into_a_folder_store_or_read_only_folder_loses_nothing(tmp_path: Path, cli,
                                                                      monkeypatch) -> None:
    import tempfile

    src = Path(__file__).resolve().parents[1] / "data" / "ionet-vllm-0.8.5"
    one = next(src.glob("*gemma*.json"))
    res = cli("ingest", str(one), "--store", str(tmp_path))
    assert res.exit_code == 2 and "a folder, not a profile store" in res.stderr

    def denied(*a, **k):  # a read-only folder (root ignores chmod: simulated)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    target = tmp_path / "ro" / "store.csv"
    res = cli("ingest", str(one), "--store", str(target))
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    assert f"{target}: cannot write (Permission denied)" in res.stderr
    assert not target.exists()
