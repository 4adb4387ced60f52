"""Trace files from an adversary (issue 16): ``read_trace`` returns a checked trace or refuses in
one line naming file and line; ``fleetplan simulate`` replaying a bad trace exits 2 with one line.

- The corpus (``tests/data/bad/trace/``, README there), each file replayed by a scenario class.
- Hypothesis writes CSV traces, valid and broken (timestamps in seconds or ISO dates, with and
  without zones, hostile token cells, cut lines), and checks the reader's law and, for the ones
  it accepts, what a replay relies on: offsets from 0, in order, whole token counts >= 1.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetplan.errors import InputError
from fleetplan.workload.trace import MAX_TRACE_TOKENS, fit_trace, read_trace, trace_requests

ROOT = Path(__file__).resolve().parents[2]
BAD = ROOT / "tests" / "data" / "bad" / "trace"
EXPECTED: dict[str, str] = json.loads((BAD / "expected.json").read_text())
HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def _scenario(tmp_path: Path, trace: Path) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({
        "model": "DeepSeek-R1-Distill-Qwen-14B",
        "classes": [{"name": "chat", "trace": {"file": str(trace), "loop": True},
                     "slo": {"ttft_p99_ms": 500}}],
        "fleet": [{"config": "1xH100-PCIe", "count": 1}],
        "sim": {"duration_s": 30.0, "warmup_s": 1.0}}))
    return p


def _refused(res: Any, scenario: Path) -> str:
    assert res.exit_code == 2 and "Traceback" not in res.stderr and res.stdout == "", res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"fleetplan: error: {scenario}: "), lines
    return lines[0]


def test_every_corpus_trace_is_listed_with_its_expected_message() -> None:
    files = {p.name for p in BAD.iterdir() if p.name not in ("expected.json", "README.md")}
    assert files == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_trace_is_refused_in_one_line_naming_scenario_and_trace(
        cli: Any, tmp_path: Path, name: str) -> None:
    s = _scenario(tmp_path, BAD / name)
    line = _refused(cli("simulate", str(s), "--format", "json", "-q"), s)
    assert str(BAD / name) in line and EXPECTED[name] in line, line[:400]


def test_cause_a_fifo_as_trace_is_refused_without_hanging(cli: Any, tmp_path: Path) -> None:
    fifo = tmp_path / "t.csv"
    os.mkfifo(fifo)  # pandas would block in open() forever
    s = _scenario(tmp_path, fifo)
    line = _refused(cli("simulate", str(s), "-q"), s)
    assert f"{fifo}: a FIFO (named pipe), not a trace file" in line


def test_cause_mixed_time_zones_are_refused_by_line_and_offsets_compared_in_utc(
        tmp_path: Path) -> None:
    # pandas raised "Mixed timezones detected" as a traceback
    p = tmp_path / "t.csv"
    p.write_text(HEADER + "2023-11-16 18:15:46+00:00,10,10\n2023-11-16 18:15:47,10,10\n")
    with pytest.raises(InputError, match=r"t\.csv: line 3: TIMESTAMP '2023-11-16 18:15:47' has "
                                         r"no time zone, unlike line 2"):
        read_trace(p)
    p.write_text(HEADER + "2023-11-16 18:15:46+00:00,10,10\n2023-11-16 20:15:50+02:00,10,10\n")
    assert read_trace(p).arrival_s.tolist() == [0.0, 4.0]


def test_cause_token_counts_beyond_int64_are_refused_not_wrapped(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text(HEADER + "0,1e30,10\n")
    with pytest.raises(InputError, match=f"ContextTokens '1e30' is not a whole number of tokens "
                                         f"within 1..{MAX_TRACE_TOKENS}"):
        read_trace(p)


@pytest.mark.parametrize("rows, words", [
    # lengths of 1 and 10^7 tokens: the cv was capped at 10 but the mean (4e17) was not, and
    # the LognormalLengths schema raised a ValidationError traceback inside solve
    ([(i, 1 if i % 2 else 10**7, 5) for i in range(50)], None),
    ([(i * 1e-9, 5, 5) for i in range(50)], r"mean rate 1e\+09 req/s"),
    ([(0, 5, 5), (1e300, 5, 5), (2e300, 5, 5)], "mean rate 1e-300 req/s"),
])
def test_cause_fitting_an_extreme_trace_is_a_fit_or_one_line(tmp_path: Path,
                                                             rows: list[tuple[Any, ...]],
                                                             words: str | None) -> None:
    p = tmp_path / "t.csv"
    p.write_text(HEADER + "".join(f"{a},{b},{c}\n" for a, b, c in rows))
    if words is None:
        fit = fit_trace(read_trace(p))
        assert fit.input_tokens.cv == pytest.approx(10.0) and fit.input_tokens.min == 1
        assert fit.input_tokens.max == 10**7 and fit.input_tokens.mean < 10**7
    else:
        with pytest.raises(InputError, match=words):
            fit_trace(read_trace(p))


# --- hypothesis ---------------------------------------------------------------------------------

SECONDS = st.one_of(st.floats(0, 1e6, allow_nan=False).map(repr), st.integers(0, 10**6).map(str),
                    st.sampled_from(["nan", "inf", "-1", "", "1e400", "0x10"]))
DATES = st.builds(lambda h, m, s, z: f"2023-11-16 {h:02d}:{m:02d}:{s:09.6f}{z}",
                  st.integers(0, 23), st.integers(0, 59), st.floats(0, 59.9),
                  st.sampled_from(["", "", "Z", "+02:00", "-0530", "+00:00"]))
TOKENS = st.one_of(st.integers(-3, 5000).map(str), st.sampled_from(
    ["1e30", "1.5", "abc", "", "nan", "inf", "10000001", " 7", "0", "٣"]))


@st.composite
def trace_texts(draw: st.DrawFn) -> str:
    stamps = draw(st.sampled_from([SECONDS, DATES]))
    rows = draw(st.lists(st.tuples(stamps, TOKENS, TOKENS), min_size=0, max_size=12))
    if draw(st.booleans()):  # mostly well-formed: sort numeric seconds so some traces pass
        rows = sorted(rows, key=lambda r: r[0])
    text = HEADER + "".join(f"{a},{b},{c}\n" for a, b, c in rows)
    if draw(st.integers(0, 5)) == 0:
        text = text[: draw(st.integers(0, len(text)))]
    return text


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=trace_texts(), loop=st.booleans(),
       scale=st.one_of(st.none(), st.floats(0.01, 1e5)))
def test_the_trace_reader_gives_a_checked_trace_or_one_line(tmp_path: Path, text: str,
                                                            loop: bool,
                                                            scale: float | None) -> None:
    p = tmp_path / "t.csv"
    p.write_text(text, encoding="utf-8")
    try:
        t = read_trace(p)
    except InputError as exc:
        msg = str(exc)
        assert msg.startswith(f"{p}: ") and "\n" not in msg and len(msg) < 500, msg
        return
    assert t.arrival_s[0] == 0.0 and (np.diff(t.arrival_s) >= 0).all()
    for col in (t.input_tokens, t.output_tokens):
        assert col.dtype == np.int64 and (col >= 1).all() and (col <= MAX_TRACE_TOKENS).all()
    try:  # what solve does with a trace class: fit it
        fit = fit_trace(t)
    except InputError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(f"{p}: ")
    else:
        assert 0 < fit.rate_rps <= 1e5 and fit.input_tokens.cv <= 10
    try:
        times, ins, outs = trace_requests(t, 60.0, scale_to_rps=scale, loop=loop)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    assert times.size == ins.size == outs.size and (times < 60.0).all()
