"""Data parallel over an MoE model: vLLM runs the ranks in step (their expert layers are one
group over every rank's GPUs), so fleetplan replays such a server as one engine over all its
GPUs with every rank's scheduler limits together, never as independent replicas
(``fleetplan.replica.priors.lockstep_config``, docs/replica-model.md "Pipeline and data
parallel"). On the one such server measured, the 4 x RTX 3090 rig's two tp2 ranks of
Qwen3.6-35B-A3B (8 runs), independent replicas overstated the throughput 1.5-2.2x."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from script_modules import load_file

from fleetplan.context import DataContext
from fleetplan.replica.params import replica_params
from fleetplan.replica.protocol import replay
from fleetplan.replica.split_replay import params_engines
from fleetplan.replica.steady import steady_state
from fleetplan.workload.lengths import protocol_length_model

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "data" / "hf-configs"


@pytest.fixture(scope="module")
def cat():
    return DataContext.build(model_configs=[CONFIGS / "Qwen3-30B-A3B"]).catalog


def test_an_moe_models_ranks_are_one_engine_over_all_the_gpus(cat) -> None:
    dp = replica_params("Qwen3-30B-A3B", "4xH100-SXM+tp2dp2", catalog=cat)
    group = replica_params("Qwen3-30B-A3B", "4xH100-SXM", catalog=cat)
    assert dp.config == "4xH100-SXM+tp2dp2" and params_engines(dp) == 1
    assert (dp.c_step, dp.c_seq, dp.c_prefill_tok, dp.c_experts) == (
        group.c_step, group.c_seq, group.c_prefill_tok, group.c_experts)
    assert dp.max_num_seqs == 2 * group.max_num_seqs
    assert dp.max_num_batched_tokens == 2 * group.max_num_batched_tokens
    assert "data parallel 2 over an MoE model steps its ranks together" in dp.source
    # a dense model's ranks stay independent replicas
    dense = replica_params("DeepSeek-R1-Distill-Qwen-7B", "4xH100-SXM+tp2dp2")
    assert params_engines(dense) == 2


def test_the_server_replays_and_sustains_as_that_one_engine(cat) -> None:
    dp = replica_params("Qwen3-30B-A3B", "4xH100-SXM+tp2dp2", catalog=cat)
    group = replica_params("Qwen3-30B-A3B", "4xH100-SXM", catalog=cat).with_(
        max_num_seqs=dp.max_num_seqs, max_num_batched_tokens=dp.max_num_batched_tokens)
    lengths = protocol_length_model(mean_input=300, mean_output=80)
    a = replay(dp, rate=8.0, num_prompts=60, lengths=lengths, seeds=(0,))
    b = replay(group, rate=8.0, num_prompts=60, lengths=lengths, seeds=(0,))
    assert a.metrics == b.metrics
    s = steady_state(dp, rate=6.0, lengths=lengths, duration_s=30, warmup_s=5)
    t = steady_state(group, rate=6.0, lengths=lengths, duration_s=30, warmup_s=5)
    keep = ("status", "measured_requests", "throughput_rps", "ttft_p99_ms", "tpot_p50_ms",
            "utilization")
    assert [getattr(s, k) for k in keep] == [getattr(t, k) for k in keep]
    assert s.measured_requests > 100


def test_the_measured_lockstep_server_is_predicted_within_its_band() -> None:
    """The rig's 8 runs at 1-16 requests in flight, predicted from specs (nothing fitted on
    them): throughput within 25 % on each and 10 % in the median (as independent replicas:
    +47 to +115 %)."""
    from fleetplan.profiles.external import load_external_runs

    ev = load_file("eval_external_lockstep", ROOT / "scripts" / "eval_external.py")
    res = ev.Resolver()
    runs = [r for r in load_external_runs().by_source()["4x3090-llm-benchmarks"]
            if r.model == "Intel/Qwen3.6-35B-A3B-int4-AutoRound" and r.dp == 2]
    outs = [ev.predict_row(r, res, engine_args=True) for r in runs]
    errs = [o.errors["throughput"] for o in outs if o.refused is None]
    assert len(errs) == 8, [o.refused for o in outs]
    assert max(abs(e) for e in errs) < 0.25
    assert statistics.median(abs(e) for e in errs) < 0.10
