"""``scripts/eval_external.py`` replays a run with every request's lengths where the source's
raw copy lists them: the lengths found add up to the run's own token totals (the CSV's means x
requests, an independent record of the same file), one pair per request."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_modules import load_file

ROOT = Path(__file__).resolve().parents[2]


def _eval():
    return load_file("eval_external_lengths", ROOT / "scripts" / "eval_external.py")


def test_recorded_lengths_match_the_runs_totals() -> None:
    from fleetplan.profiles.external import load_external_runs

    ev = _eval()
    runs = load_external_runs().by_source()["lambdalabs-vllm-benchmark"]
    found = 0
    for run in runs:
        got = ev.recorded_lengths(run)
        if got is None:
            continue
        found += 1
        ins, outs = got
        assert len(ins) == len(outs) == run.num_prompts
        # the CSV keeps four significant digits of the means: half a unit of the fourth
        assert sum(ins) == pytest.approx(run.input_tokens_mean * run.num_prompts, rel=5e-4)
        # a reply of 0 tokens is replayed as 1: at least the recorded total, more by the zeros
        assert sum(outs) >= run.output_tokens_mean * run.num_prompts * (1 - 5e-4)
        assert min(outs) >= 1 and min(ins) >= 1
    assert found == 3  # the 10- and 40-prompt files whose lengths were copied
