"""A mixture-of-experts step reads the experts its tokens are routed to, not every expert
resident (issue 41, item 2: at one sequence Qwen3.6-35B-A3B read its 35 B parameters where a
step reads ~3 B, and TPOT came out three times the measured one), and no expert more than once
however many tokens the step holds (Mixtral-8x7B on 2 x A100 in a 320-prompt burst: a straight
line through the reads at 1 and 32 sequences charged every sequence beyond 32 another 0.3-0.5 ms
and TPOT came out 2.5 x the measured 62 ms)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetplan.catalog.catalog import bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.catalog.models import ModelSpec
from fleetplan.replica.priors import expert_reads, prior_params
from fleetplan.replica.step_math import decode_plan, expert_time, step_time

MIXTRAL = ModelSpec(model="moe", hf_id="x/moe", architecture="MixtralForCausalLM",
                    params_b=46.7, active_params_b=12.9, layers=32, hidden_size=4096,
                    intermediate_size=14336, attention_heads=32, kv_heads=8, head_dim=128,
                    vocab_size=32000, context_length=32768, served_dtype="bfloat16",
                    weight_bytes_per_param=2.0, num_experts=8, experts_per_token=2,
                    moe_intermediate_size=14336, source="test")
# routed experts: P - A = R (E - k) / E -> R = 33.8 B x 8 / 6 = 45.07 B parameters
ROUTED = (46.7 - 12.9) * 8 / 6 * 1e9 * 2.0


def test_a_dense_model_reads_every_weight_once_a_step() -> None:
    spec = bundled_catalog().model("DeepSeek-R1-Distill-Qwen-14B")
    assert expert_reads(spec) == (spec.weight_bytes, 0.0, 0.0)
    p = prior_params(spec, HardwareConfig.parse("1xH100-PCIe", bundled_catalog()))
    assert (p.c_experts, p.expert_share) == (0.0, 0.0)
    assert "c_experts" not in p.model_dump()  # a dense model's record is as before


def test_moe_reads_by_hand() -> None:
    first, routed, share = expert_reads(MIXTRAL)
    assert routed == pytest.approx(ROUTED)
    assert share == 2 / 8
    # one token reads exactly the active parameters: shared weights and its k experts
    assert first == pytest.approx(12.9e9 * 2.0)


def test_a_step_reads_each_routed_expert_at_most_once() -> None:
    # 1 s to read every routed expert; a token touches 2 of 8
    assert expert_time(1.0, 0.25, 1) == 0.0  # one token: its experts are in c_step
    assert expert_time(1.0, 0.25, 2) == pytest.approx(1 - 0.75 ** 2 - 0.25)  # 0.1875
    assert expert_time(1.0, 0.25, 4) == pytest.approx(1 - 0.75 ** 4 - 0.25)  # 0.43359375
    # by 64 tokens all 8 are read: the rest of the routed weights, 0.75 s, and no more
    assert expert_time(1.0, 0.25, 64) == pytest.approx(0.75)
    assert expert_time(1.0, 0.25, 320) == pytest.approx(0.75)
    # a dense model: nothing
    assert expert_time(0.0, 0.0, 320) == 0.0


def test_the_mixtral_burst_step_is_bounded_by_reading_every_weight_once() -> None:
    """2 x A100-80GB, 256 decoders: the step's weight reads are at most the whole model's
    93.4 GB over two GPUs' 2 x 2039 GB/s (22.9 ms) at the prior's bandwidth efficiency, where
    the straight line charged 0.3-0.5 ms per decoder beyond 32 (~100 ms)."""
    cat = bundled_catalog()
    hw = HardwareConfig.parse("2xA100-80GB", cat)
    p = prior_params(MIXTRAL, hw)
    bw = hw.spec.mem_bandwidth_gb_s * 1e9
    assert p.expert_share == 0.25
    ratio = p.c_experts / (ROUTED / 2 / bw)  # the efficiency the reads got (c_step's)
    whole = 46.7e9 * 2.0 / 2 / bw * ratio
    # one token's reads (the active parameters, in c_step) and the rest the 256 touch
    reads = 12.9e9 * 2.0 / 2 / bw * ratio + expert_time(p.c_experts, p.expert_share, 256)
    assert reads == pytest.approx(whole, rel=1e-6)
    # and the decoders beyond that cost only their compute: the step at 256 less the step at
    # 128 is 128 x c_seq plus the KV read, no expert term left
    t256 = step_time(p.c_step, p.c_prefill_tok, p.c_seq, p.c_kv_tok, 0, 256, 0,
                     p.c_experts, p.expert_share)
    t128 = step_time(p.c_step, p.c_prefill_tok, p.c_seq, p.c_kv_tok, 0, 128, 0,
                     p.c_experts, p.expert_share)
    assert t256 - t128 == pytest.approx(128 * p.c_seq, rel=1e-9)
    assert p.step_s(0, 256, 0) == pytest.approx(t256)


@given(n=st.integers(1, 4096), share=st.floats(0.001, 0.5), c=st.floats(1e-4, 1.0))
def test_expert_reads_grow_with_the_step_and_never_pass_every_expert(
        n: int, share: float, c: float) -> None:
    now, more = expert_time(c, share, n), expert_time(c, share, n + 1)
    assert 0.0 <= now <= more <= c * (1 - share) + 1e-12


@given(n=st.integers(1, 2048), step=st.integers(0, 100))
def test_a_decode_plan_starts_with_the_step_time(n: int, step: int) -> None:
    """The fast path through decode-only steps charges the first step what step_time does."""
    c = (0.01, 1e-4, 2e-4, 1e-8)
    a, _b = decode_plan(c[0], c[2], c[3], n, 1000, step, 0.02, 2 / 8)
    assert a == pytest.approx(step_time(c[0], c[1], c[2], c[3], 0, n, 1000 + n * step,
                                        0.02, 2 / 8))
