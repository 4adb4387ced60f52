"""A mixture-of-experts decode step reads the experts its tokens are routed to, not every
expert resident (issue 41, item 2: at one sequence Qwen3.6-35B-A3B read its 35 B parameters
where a step reads ~3 B, and TPOT came out three times the measured one)."""

from __future__ import annotations

import pytest

from fleetplan.catalog.catalog import bundled_catalog
from fleetplan.catalog.models import ModelSpec
from fleetplan.replica.priors import MOE_REFERENCE_BATCH, expert_reads


def test_a_dense_model_reads_every_weight_once_a_step() -> None:
    spec = bundled_catalog().model("DeepSeek-R1-Distill-Qwen-14B")
    assert expert_reads(spec) == (spec.weight_bytes, 0.0)


def test_moe_reads_by_hand() -> None:
    spec = ModelSpec(model="moe", hf_id="x/moe", architecture="MixtralForCausalLM",
                     params_b=46.7, active_params_b=12.9, layers=32, hidden_size=4096,
                     intermediate_size=14336, attention_heads=32, kv_heads=8, head_dim=128,
                     vocab_size=32000, context_length=32768, served_dtype="bfloat16",
                     weight_bytes_per_param=2.0, num_experts=8, experts_per_token=2,
                     moe_intermediate_size=14336, source="test")
    # routed experts: P - A = R (E - k) / E -> R = 33.8 B x 8 / 6 = 45.07 B parameters
    routed = (46.7 - 12.9) * 8 / 6 * 1e9 * 2.0
    first, more = expert_reads(spec)
    assert first == pytest.approx(46.7e9 * 2.0 - routed + routed * 2 / 8)
    # at the reference batch the share touched is 1 - (6/8)^32: the secant from batch 1
    share = 1 - (6 / 8) ** MOE_REFERENCE_BATCH
    assert more == pytest.approx(routed * (share - 2 / 8) / (MOE_REFERENCE_BATCH - 1))
    # the line meets the exact reads at batch 1 and at the reference batch
    assert first + (MOE_REFERENCE_BATCH - 1) * more == pytest.approx(
        46.7e9 * 2.0 - routed + routed * share)
    # one sequence reads exactly the active parameters: shared weights and its k experts
    assert first == pytest.approx(12.9e9 * 2.0)
