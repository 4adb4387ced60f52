"""What a measured run that did not record every request's lengths is replayed with
(``fleetplan.replica.run_lengths``): the study's runs keep the protocol length model; anyone
else's keep their own workload, ShareGPT-like or fixed-length, at their own mean lengths."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from fleetplan.profiles.server import ServerDescription
from fleetplan.replica.measured_run import MeasuredRun
from fleetplan.replica.run_lengths import even_split, replay_lengths


def _run(mean_in: float, mean_out: float, *, dataset: str | None = None, n: int = 200,
         foreign: bool = True) -> MeasuredRun:
    return MeasuredRun(
        run_id="r", model="m", config="1xH100-PCIe", gpu="H100-PCIe", gpu_count=1,
        request_rate=4.0, num_prompts=n, burstiness=1.0,
        total_input_tokens=int(mean_in * n), total_output_tokens=int(mean_out * n),
        series_max_rate=4.0, server=ServerDescription() if foreign else None, dataset=dataset)


@given(st.integers(1, 10**7), st.integers(1, 5000))
def test_an_even_split_keeps_the_total_and_differs_by_one_token_at_most(total: int,
                                                                         n: int) -> None:
    parts = even_split(total, n)
    assert len(parts) == n and min(parts) >= 1
    assert sum(parts) == max(total, n)
    assert max(parts) - min(parts) <= 1


def test_the_studys_runs_keep_the_protocol_model() -> None:
    assert replay_lengths(_run(208, 208, foreign=False)) == {}


def test_sharegpt_prompts_are_drawn_at_the_runs_own_means() -> None:
    # named (vLLM's sharegpt, fleetplan bench's synthetic prompts of the study's lengths), or
    # unnamed and short
    for run in (_run(300, 250, dataset="ShareGPT_V3"), _run(300, 250),
                _run(300, 250, dataset="random-sharegpt-lengths")):
        lm = replay_lengths(run)["lengths"]
        assert "ShareGPT-like protocol" in lm.source and "300/250 tokens" in lm.source


def test_fixed_length_prompts_are_sent_at_the_runs_mean_lengths() -> None:
    # vLLM's random dataset, or prompts too long for the ShareGPT sampler (under 1,024
    # tokens): every request at the mean, the totals kept to the token
    for run in (_run(300, 250, dataset="random"), _run(4000, 1000), _run(900, 900),
                _run(3000, 500, dataset="sharegpt")):  # longer than that sampler sends
        ins, outs = replay_lengths(run)["request_lengths"]
        assert (sum(ins), sum(outs)) == (run.total_input_tokens, run.total_output_tokens)
        assert max(ins) - min(ins) <= 1 and max(outs) - min(outs) <= 1


def test_a_run_of_long_prompts_is_validated_not_refused(cli, foreign_run) -> None:
    # 4,000-token prompts and 1,000-token replies, token totals only: before, the study's
    # ShareGPT caps (prompt < 1024) could not hold them and the run was refused
    def ttft(name: str, mean_in: int) -> float:
        run = foreign_run(name, total_input_tokens=200 * mean_in, total_output_tokens=200 * 200)
        res = cli("validate", str(run), "--gpu", "H100-PCIe", "--gpu-count", "1",
                  "--format", "json")
        assert res.exit_code == 0, res.stderr
        (rec,) = json.loads(res.stdout)["runs"]
        return float(rec["metrics"]["ttft_p50_ms"]["predicted"])

    # twenty times the prompt tokens: each prefill takes longer, so does the first token
    assert ttft("long.json", 4000) > ttft("short.json", 200)
