"""Arrival kinds: Azure-format traces (read, replay, scale, fit) and hourly rate profiles."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fleetplan.errors import InputError
from fleetplan.workload.profile import cumulative_rate, profile_arrivals, rate_at
from fleetplan.workload.trace import fit_trace, read_trace, trace_requests

ROOT = Path(__file__).resolve().parents[2]


def _write(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    + "".join(f"{a},{b},{c}\n" for a, b, c in rows))
    return path


def test_reads_azure_timestamps(tmp_path: Path) -> None:
    p = _write(tmp_path / "t.csv", [("2023-11-16 18:15:46.6805900", "374", "44"),
                                    ("2023-11-16 18:15:50.9951690", "396", "109"),
                                    ("2023-11-16 18:15:51.2224670", "879", "55")])
    t = read_trace(p)
    assert len(t) == 3
    np.testing.assert_allclose(t.arrival_s, [0.0, 4.314579, 4.541877], atol=1e-6)
    assert t.input_tokens.tolist() == [374, 396, 879]
    assert t.output_tokens.tolist() == [44, 109, 55]


@pytest.mark.parametrize(("rows", "expected"), [
    ([("0", "10", "5"), ("1.5", "abc", "5")], "line 3: ContextTokens 'abc' is not a whole"),
    ([("0", "10", "5"), ("1.5", "10", "0")], "line 3: GeneratedTokens '0'"),
    ([("2023-11-16 18:15:46.68", "10", "5"), ("yesterday", "10", "5")],
     "line 3: TIMESTAMP 'yesterday' is not a timestamp"),
    ([("0", "10", "5"), ("3", "10", "5"), ("2", "10", "5")],
     "line 4: TIMESTAMP '2' is earlier than the line before"),
])
def test_unparsable_line_is_named(tmp_path: Path, rows, expected: str) -> None:
    p = _write(tmp_path / "bad.csv", rows)
    with pytest.raises(InputError, match="bad.csv") as e:
        read_trace(p)
    assert expected in str(e.value)


def test_missing_columns_and_files(tmp_path: Path) -> None:
    p = tmp_path / "x.csv"
    p.write_text("time,prompt\n1,2\n")
    with pytest.raises(InputError, match="missing column"):
        read_trace(p)
    with pytest.raises(InputError, match="trace file not found"):
        read_trace(tmp_path / "none.csv")


def test_replay_as_is_and_scaled(tmp_path: Path) -> None:
    rows = [(str(t), "100", "10") for t in (0.0, 1.0, 1.5, 4.0, 9.0)]  # 4 gaps in 9 s
    tr = read_trace(_write(tmp_path / "t.csv", rows))
    t, ins, outs = trace_requests(tr, 9.5)
    assert t.tolist() == [0.0, 1.0, 1.5, 4.0, 9.0] and ins.tolist() == [100] * 5
    # scaled to 4 req/s: same pattern, 9x faster (native rate: 4 gaps in 9 s)
    t2, _, _ = trace_requests(tr, 1.2, scale_to_rps=4.0)
    np.testing.assert_allclose(t2, np.array([0.0, 1.0, 1.5, 4.0, 9.0]) / 9.0)
    with pytest.raises(InputError, match="shorter than sim.duration_s"):
        trace_requests(tr, 60.0)
    t3, _, _ = trace_requests(tr, 30.0, loop=True)  # period = 9 s + one mean gap (2.25 s)
    assert t3.size == 14 and t3[5] == pytest.approx(11.25)


def test_scaled_real_trace_has_the_target_rate(azure_sample: Path) -> None:
    tr = read_trace(azure_sample)
    assert len(tr) == 2867  # the first 600 s of the conversation trace
    t, _, _ = trace_requests(tr, 120.0, scale_to_rps=20.0)
    assert t.size / 120.0 == pytest.approx(20.0, rel=0.15)


def test_scaled_full_trace_has_the_target_rate(azure_dir: Path) -> None:
    tr = read_trace(azure_dir / "AzureLLMInferenceTrace_conv.csv")
    assert len(tr) == 19366
    t, _, _ = trace_requests(tr, 600.0, scale_to_rps=20.0)
    assert t.size / 600.0 == pytest.approx(20.0, rel=0.15)


def test_fit_recovers_burstiness_and_lengths(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    gaps = rng.gamma(0.4, 1 / (4.0 * 0.4), size=20000)  # 4 req/s, burstiness 0.4
    t = np.concatenate([[0.0], np.cumsum(gaps)])
    sigma = np.sqrt(np.log1p(0.8**2))
    ins = np.maximum(1, np.rint(rng.lognormal(np.log(500) - sigma**2 / 2, sigma, t.size)))
    df = pd.DataFrame({"TIMESTAMP": t, "ContextTokens": ins.astype(int), "GeneratedTokens": 20})
    df.to_csv(tmp_path / "g.csv", index=False)
    fit = fit_trace(read_trace(tmp_path / "g.csv"))
    assert fit.rate_rps == pytest.approx(4.0, rel=0.03)
    assert fit.burstiness == pytest.approx(0.4, rel=0.06)
    assert fit.input_tokens.mean == pytest.approx(500, rel=0.03)
    assert fit.input_tokens.cv == pytest.approx(0.8, rel=0.05)
    fields = fit.class_fields()
    assert set(fields) == {"rate_rps", "burstiness", "input_tokens", "output_tokens"}


def test_real_conversation_trace_is_burstier_than_poisson(azure_sample: Path) -> None:
    fit = fit_trace(read_trace(azure_sample))
    assert fit.burstiness < 1.0  # gamma shape < 1: gaps more variable than Poisson's
    assert fit.rate_rps == pytest.approx(2867 / 600, rel=0.02)
    assert 1000 < fit.input_tokens.max <= 14050


def test_full_conversation_trace_is_burstier_than_poisson(azure_dir: Path) -> None:
    fit = fit_trace(read_trace(azure_dir / "AzureLLMInferenceTrace_conv.csv"))
    assert fit.burstiness < 1.0
    assert 1000 < fit.input_tokens.max <= 14050


def test_example_trace_is_the_first_ten_minutes_of_the_azure_data(azure_dir: Path) -> None:
    ours = (ROOT / "examples" / "azure-conv-10min.csv").read_text().splitlines()
    src = (azure_dir / "AzureLLMInferenceTrace_conv.csv").read_text().splitlines()
    assert ours == src[:len(ours)] and len(ours) > 2000


# --- hourly profiles ----------------------------------------------------------------------------

def test_profile_follows_each_hour() -> None:
    rates = [1.0] * 6 + [0.0] * 6 + [4.0] * 12
    t = profile_arrivals(rates, 86400.0, 1.0, np.random.default_rng(2))
    per_hour = np.bincount((t // 3600).astype(int), minlength=24) / 3600.0
    assert per_hour[6:12].sum() == 0
    np.testing.assert_allclose(per_hour[:6], 1.0, rtol=0.1)
    np.testing.assert_allclose(per_hour[12:], 4.0, rtol=0.06)
    assert np.all(np.diff(t) >= 0) and t.max() < 86400


def test_profile_start_hour_and_bursty_gaps() -> None:
    rates = [0.0] * 23 + [10.0]
    assert rate_at(rates, 0.0, start_hour=23) == 10.0
    assert rate_at(rates, 3600.0, start_hour=23) == 0.0
    t = profile_arrivals(rates, 7200.0, 0.25, np.random.default_rng(3), start_hour=23)
    assert t.max() < 3600.0 and t.size == pytest.approx(36000, rel=0.1)
    gaps = np.diff(t)
    assert gaps.std() / gaps.mean() == pytest.approx(2.0, rel=0.15)  # cv = 1/sqrt(0.25)
    tt, lam = cumulative_rate(rates, 7200.0, start_hour=23)
    assert tt.tolist() == [0.0, 3600.0, 7200.0] and lam.tolist() == [0.0, 36000.0, 36000.0]


def test_profile_refuses_bad_rates() -> None:
    with pytest.raises(InputError, match="need 24 hourly rates"):
        profile_arrivals([1.0] * 5, 10.0, 1.0, np.random.default_rng(0))
    with pytest.raises(InputError, match=r"rate_profile_rps\[3\]"):
        profile_arrivals([1.0] * 3 + [-1.0] + [1.0] * 20, 10.0, 1.0, np.random.default_rng(0))
