"""Data parallel over an MoE model is refused with one line, not replayed as independent
replicas: vLLM runs such a server's ranks in step (their expert layers are one group over every
rank's GPUs), and the one such server measured (the 4 x RTX 3090 rig's tp2dp2 runs of
Qwen3.6-35B-A3B) ran at half the throughput independent replicas give. A dense model's
data-parallel ranks, and an MoE model's tensor-parallel server, are replayed as before; a solve
leaves the refused candidate out with a note and plans on the others."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.context import DataContext
from fleetplan.errors import Unmodelled
from fleetplan.replica.priors import prior_params

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "hf-configs"


@pytest.fixture(scope="module")
def ctx() -> DataContext:
    return DataContext.build(model_configs=[CONFIGS / "Qwen3-30B-A3B"])


def test_an_moe_model_served_data_parallel_is_refused_in_one_line(ctx: DataContext) -> None:
    cat = ctx.catalog
    moe = cat.model("Qwen3-30B-A3B")
    with pytest.raises(Unmodelled) as err:
        prior_params(moe, HardwareConfig.parse("4xH100-SXM+tp2dp2", cat))
    line = str(err.value)
    assert "\n" not in line and line.startswith(
        "Qwen3-30B-A3B on 4xH100-SXM+tp2dp2: data parallel 2 over an MoE model is not modelled")
    assert "2 servers of 2 GPU(s)" in line
    # the same model on one tensor-parallel group, and a dense model data-parallel: replayed
    assert prior_params(moe, HardwareConfig.parse("2xH100-SXM", cat)).expert_share > 0
    dense = cat.model("DeepSeek-R1-Distill-Qwen-7B")
    assert prior_params(dense, HardwareConfig.parse("4xH100-SXM+tp2dp2", cat)).c_step > 0
