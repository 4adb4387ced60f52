"""The external benchmark fixtures (``data/external``) load as typed, attributed records, and a
bad row is refused alone with one line naming file, row, column and value."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from fleetplan.profiles.external import (
    COLUMNS,
    ExternalRun,
    external_dir,
    load_external_runs,
    read_external_csv,
)

GOOD = {
    "source": "demo", "source_file": "results/a.json", "commit": "0123456789abcdef",
    "run_id": "a/c8", "model": "org/Model-7B", "gpu": "RTX-4090", "gpu_count": "2", "tp": "2",
    "engine": "vllm", "load_kind": "concurrency", "load_value": "8",
    "input_tokens_mean": "512", "output_tokens_requested": "256", "ttft_p50_ms": "120.5",
    "ttft_p99_ms": "300", "output_tok_s": "900",
}


def _write(tmp_path: Path, rows: list[dict[str, str]], name: str = "demo.csv") -> Path:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(COLUMNS), lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    path = tmp_path / name
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


def test_cells_are_typed_and_an_empty_cell_means_unstated(tmp_path: Path) -> None:
    (run,) = read_external_csv(_write(tmp_path, [GOOD])).runs
    assert run.gpu_count == 2 and isinstance(run.gpu_count, int)
    assert run.ttft_p50_ms == 120.5 and run.load_value == 8.0
    assert run.tpot_p50_ms is None and run.pp is None  # empty: the source did not say
    assert run.prefix_cache == "unknown"
    assert run.config == "2xRTX-4090"
    assert run.output_tokens == 256.0  # no recorded mean: the requested max_tokens


@pytest.mark.parametrize(("column", "value", "said"), [
    ("gpu_count", "two", "gpu_count: 'two'"),
    ("ttft_p50_ms", "-3", "ttft_p50_ms: '-3'"),
    ("load_kind", "ramp", "load_kind: 'ramp'"),
    ("commit", "not-a-sha", "commit: 'not-a-sha'"),
    ("load_value", "", "load_value: ''"),             # a concurrency load needs its value
    ("tp", "4", "gpu_count: '2'"),                    # 2 GPUs cannot hold tp 4
    ("ttft_p99_ms", "100", "ttft_p50_ms: '120.5'"),   # p50 above p99
    ("source", "", "source: ''"),                     # every row is attributed
])
def test_a_bad_row_is_refused_alone_naming_file_row_column_and_value(
        tmp_path: Path, column: str, value: str, said: str) -> None:
    bad = {**GOOD, "run_id": "bad", column: value}
    path = _write(tmp_path, [GOOD, bad, {**GOOD, "run_id": "a/c16", "load_value": "16"}])
    got = read_external_csv(path)
    assert [r.run_id for r in got.runs] == ["a/c8", "a/c16"]
    assert len(got.errors) == 1
    (line,) = got.errors
    assert "\n" not in line
    assert line.startswith(f"{path}: row 3, column ") and said in line


def test_a_file_with_an_unknown_column_is_refused_in_one_line_and_others_still_load(
        tmp_path: Path) -> None:
    good = _write(tmp_path, [GOOD], "a.csv")
    odd = tmp_path / "b.csv"
    odd.write_text("source,ttft_median\nx,1\n", encoding="utf-8")
    got = load_external_runs(good, odd)
    assert len(got.runs) == 1
    assert len(got.errors) == 1 and got.errors[0].startswith(f"{odd}: missing required column")


def test_bundled_fixtures_load_without_a_refused_row_and_every_row_is_attributed() -> None:
    got = load_external_runs()
    assert got.errors == ()
    by_source = got.by_source()
    assert {"4x3090-llm-benchmarks", "llm-bench-2x4090"} <= set(by_source)
    readme = (external_dir() / "README.md").read_text(encoding="utf-8")
    for source, runs in by_source.items():
        assert f"`{source}.csv`" in readme  # each source has its section (URL, licence)
        for r in runs:
            assert r.source_file and len(r.commit) == 40 and r.run_id
    # the fixtures stay compact (derived summaries, not raw per-request arrays)
    assert sum(p.stat().st_size for p in external_dir().rglob("*") if p.is_file()) < 1_100_000


def test_the_tp_rtx_3090_sweeps_state_what_the_issue_relies_on() -> None:
    # #42: TP 1/2/4 over PCIe with TTFT p50/p99 and ITL at several concurrencies
    runs = [r for r in load_external_runs().runs if r.source == "4x3090-llm-benchmarks"]
    with_latency = [r for r in runs if r.ttft_p50_ms is not None and r.itl_p50_ms is not None]
    assert {r.tp for r in with_latency} == {1, 2, 4}
    assert len({r.load_value for r in with_latency if r.tp == 4}) >= 4
    assert all(r.gpu == "RTX-3090" and "PCIe-3.0" in (r.interconnect or "") for r in runs)


def test_a_single_stream_output_rate_never_leaves_out_its_own_first_token() -> None:
    # a rate over the request's wall time includes the TTFT, so one stream's output tokens take
    # at least the TTFT at that rate; the dflash-depth rows' recorded rate is the decode rate
    # (46 tok/s after a 368 s TTFT), which the builder turns into TPOT (README, 4 x RTX 3090)
    runs = load_external_runs().runs
    checked = 0
    for r in runs:
        if r.load_kind == "concurrency" and r.load_value == 1 and r.output_tok_s and \
                r.ttft_p50_ms and r.output_tokens_requested:
            checked += 1
            assert r.output_tokens_requested / r.output_tok_s >= r.ttft_p50_ms / 1000, r.run_id
    assert checked >= 20
    decode = [r for r in runs if r.run_id.startswith("dflash-depth/target/tp4/")]
    assert len(decode) == 8 and all(r.output_tok_s is None for r in decode)
    assert all(r.tpot_p50_ms is not None and r.tpot_p50_ms >= r.itl_p50_ms * 0.95 for r in decode)


def test_the_record_and_the_builder_share_one_column_order() -> None:
    header = next(csv.reader(io.StringIO(
        (external_dir() / "llm-bench-2x4090.csv").read_text(encoding="utf-8"))))
    assert tuple(header) == COLUMNS == tuple(ExternalRun.model_fields)
