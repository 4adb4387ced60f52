"""A vLLM 0.5.x server as its own source sets it up (0.5.4: V0 engine, whole prompts below 32K
of context, ``max(max_model_len, 2048)`` batched tokens, a burst taken in one request at a time),
carried from the engine version to the replay, and 0.7.x's long contexts (chunks of 2048, none on
ROCm). Expected values are worked out by hand from vLLM 0.5.4's ``vllm/config.py`` 804-818 and
``vllm/engine/arg_utils.py`` 55-63, 746-773, and 0.7.3's ``arg_utils.py`` 1163-1194 and
``config.py`` 1521-1536."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.catalog import HardwareConfig, bundled_catalog
from fleetplan.profiles.server import ServerDescription
from fleetplan.replica.engine_defaults import chunks_prefill, engine_defaults, intake_is_serial
from fleetplan.replica.priors import prior_params
from fleetplan.replica.protocol import intake_release, simulate_requests
from fleetplan.replica.server_params import apply_server, v0_budget

LLAMA = bundled_catalog().model("Meta-Llama-3-8B-Instruct")  # 8192 tokens of context
H100 = HardwareConfig.parse("1xH100-SXM")


def test_vllm_054_defaults() -> None:
    d = engine_defaults("0.5.4")
    assert (d.engine, d.max_num_seqs, d.block_size, d.gpu_memory_utilization) == (
        "V0", 256, 16, 0.9)
    assert (d.chunked_prefill, d.prefix_caching, d.cuda_graph_max_batch) == (False, False, 256)
    assert d.scheduler_budget(2000) == (2048, False)    # max(2000, 2048)
    assert d.scheduler_budget(8192) == (8192, False)
    assert d.scheduler_budget(40000) == (512, True)     # > 32768: chunked, 512 tokens
    # the H100 rule of 0.8.5 (8192 / 1024 at >= 70 GiB) does not exist yet
    assert engine_defaults("0.5.4", "H100-SXM", 79.6).max_num_batched_tokens == 2048


def test_policy_and_intake_by_version() -> None:
    assert chunks_prefill("0.5.4", 8192) is False
    assert chunks_prefill("0.5.4", 131072) is True
    assert chunks_prefill("0.6.3", 8192) is False
    assert chunks_prefill("0.8.5", 8192) is True
    assert chunks_prefill(None, 8192) is True          # the study's 0.8.5
    assert chunks_prefill("0.4.3", 8192) is True       # no defaults known: the study's
    assert intake_is_serial("0.5.4") is True
    assert intake_is_serial("0.6.3") is intake_is_serial("0.8.5") is intake_is_serial(None)
    assert intake_is_serial("0.8.5") is False


def test_the_prior_of_an_old_server_schedules_whole_prompts() -> None:
    old = prior_params(LLAMA, H100, engine_version="0.5.4")
    assert (old.chunked_prefill, old.max_num_batched_tokens, old.max_num_seqs) == (
        False, 8192, 256)
    new = prior_params(LLAMA, H100)
    assert new.chunked_prefill is True
    # V1's policy dumps as before the field existed (calibration files and cache keys)
    assert "chunked_prefill" not in new.model_dump()
    assert old.model_dump()["chunked_prefill"] is False


def test_a_stated_context_sets_the_v0_budget() -> None:
    # Lambda's servers: --max-model-len 2048 --max-num-seqs 1024 on vLLM 0.5.4
    assert v0_budget("0.5.4", {"max_model_len": 2048}) == (2048, False)
    assert v0_budget("0.5.4", {"max_model_len": 2000}) == (2048, False)
    assert v0_budget("0.5.4", {"max_model_len": 2048, "max_num_batched_tokens": 4096}) is None
    assert v0_budget("0.8.5", {"max_model_len": 2048}) is None
    assert v0_budget(None, {"max_model_len": 2048}) is None
    base = prior_params(LLAMA, H100, engine_version="0.5.4")
    sd = ServerDescription(engine_args={"max_model_len": 2048, "max_num_seqs": 1024},
                           engine_version="0.5.4")
    got = apply_server(base, sd)
    assert (got.max_num_batched_tokens, got.max_num_seqs, got.chunked_prefill,
            got.max_model_len) == (2048, 1024, False, 2048)
    v1 = apply_server(prior_params(LLAMA, H100), ServerDescription(
        engine_args={"max_model_len": 2048}, engine_version="0.8.5"))
    assert (v1.max_num_batched_tokens, v1.chunked_prefill) == (8192, True)


def test_intake_release_by_hand() -> None:
    # three at once, 1 s each: all reach the scheduler when the third is taken in
    assert intake_release(np.zeros(3), 1.0).tolist() == [3.0, 3.0, 3.0]
    # spaced out: each 1 s after its arrival (the intake idle in between)
    assert intake_release(np.array([0.0, 5.0]), 1.0).tolist() == [1.0, 6.0]
    # 0.5 arrives while 0 is taken in (busy until 1, then 2); 3 finds it idle again
    assert intake_release(np.array([3.0, 0.0, 0.5]), 1.0).tolist() == [4.0, 2.0, 2.0]


def test_a_burst_waits_for_the_intake_then_runs_v0_steps() -> None:
    toy = prior_params(LLAMA, H100).with_(
        c_step=0.01, c_prefill_tok=0.001, c_seq=0.002, c_kv_tok=0.0, overhead_s=0.01,
        c_deliver=0.0, kv_capacity_tokens=16_000, max_num_seqs=8, max_num_batched_tokens=100,
        max_model_len=600, chunked_prefill=False)
    # taken in by 0.03 s; then prompts A+B (0.100 s) and C alone (0.060 s)
    reqs, _ = simulate_requests(toy, np.zeros(3), np.array([60, 30, 50]),
                                np.array([3, 2, 2]), serial_intake=True)
    assert [r.first_token_s - r.arrival_s for r in reqs] == pytest.approx(
        [0.130, 0.130, 0.190], abs=1e-12)
    # without the serial intake each reaches the scheduler overhead_s after its arrival
    reqs, _ = simulate_requests(toy, np.zeros(3), np.array([60, 30, 50]),
                                np.array([3, 2, 2]))
    assert [r.first_token_s for r in reqs] == pytest.approx([0.110, 0.110, 0.170], abs=1e-12)


def test_validate_replays_a_054_burst_through_the_intake() -> None:
    # the same burst and parameters, recorded by vLLM 0.5.4 and by 0.8.5: all 64 prompts reach
    # the scheduler together either way (at 64 x overhead_s through 0.5.4's intake, at
    # overhead_s otherwise), so every first token comes 63 x overhead_s later on 0.5.4
    from fleetplan.replica.measured_run import MeasuredRun
    from fleetplan.replica.runs import predict_run

    params = prior_params(LLAMA, H100, engine_version="0.5.4").with_(c_deliver=0.0)
    runs = [MeasuredRun(run_id=f"burst-{v}", model=LLAMA.model, config=H100.name,
                        gpu=H100.gpu, gpu_count=1, request_rate=float("inf"), num_prompts=64,
                        burstiness=1.0, total_input_tokens=64 * 200,
                        total_output_tokens=64 * 100, series_max_rate=float("inf"),
                        engine_version=v) for v in ("0.5.4", "0.8.5")]
    old, new = (predict_run(params, r, seeds=(0,), warm=False) for r in runs)
    shift_ms = 63 * params.overhead_s * 1e3
    for k in ("ttft_p50_ms", "ttft_p99_ms", "ttft_mean_ms"):
        assert old[k] - new[k] == pytest.approx(shift_ms, abs=1e-6)
    assert old["tpot_p50_ms"] == pytest.approx(new["tpot_p50_ms"], abs=1e-9)


def test_predict_replays_a_054_burst_through_the_intake() -> None:
    # `fleetplan predict --engine-version 0.5.4`: 40 prompts at once, the same shift as validate
    from fleetplan.validate.prediction import PredictRequest, run_prediction

    got = {v: run_prediction(PredictRequest(
        config="1xH100-SXM", rate=float("inf"), model="Meta-Llama-3-8B-Instruct",
        num_prompts=40, seeds=1, arrival_seed=0, engine_version=v)) for v in ("0.5.4", "0.6.3")}
    overhead = got["0.5.4"].params.overhead_s
    # both V0 with the same defaults (only the cited source differs)
    assert got["0.5.4"].params.with_(source="-") == got["0.6.3"].params.with_(source="-")
    shift = got["0.5.4"].result["ttft_p50_ms"] - got["0.6.3"].result["ttft_p50_ms"]
    assert shift == pytest.approx(39 * overhead * 1e3, abs=1e-6)


def test_sustained_load_on_a_v0_server_runs_its_scheduler() -> None:
    # the compiled loop has V1's policy only: V0 parameters take the SimPy engine, whatever
    # was asked, so the same steady run comes out either way
    from fleetplan.replica.steady import steady_state

    params = prior_params(LLAMA, H100, engine_version="0.5.4")
    a, b = (steady_state(params, rate=6.0, duration_s=40.0, warmup_s=10.0, engine=e)
            for e in ("compiled", "simpy"))
    assert a.ttft_p50_ms == b.ttft_p50_ms and a.tpot_p50_ms == b.tpot_p50_ms


def test_0_7_chunks_long_contexts_by_2048_and_not_on_rocm() -> None:
    # vLLM 0.7.3 arg_utils.py 1163-1194 (not on ROCm: 1181-1185), config.py 1521-1536
    assert engine_defaults("0.7.3").scheduler_budget(65536) == (2048, True)
    assert engine_defaults("0.7.3").scheduler_budget(65536, "MI300X") == (65536, False)
    assert engine_defaults("0.6.3").scheduler_budget(65536, "MI300X") == (512, True)
    assert engine_defaults("0.7.3").scheduler_budget(8192, "H100-SXM") == (8192, False)
    assert chunks_prefill("0.7.2", 131072, "MI300X") is False
    assert chunks_prefill("0.7.2", 131072, "H100-SXM") is True
