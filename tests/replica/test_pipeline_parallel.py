"""Pipeline parallel and multi-node servers (issue 41, item 2): the micro-batch step's
arithmetic worked by hand from the catalog's figures, each stage's share of the KV cache, and
what a run on two stages gives against one GPU (docs/replica-model.md "Pipeline and data
parallel")."""

from __future__ import annotations

import json
import math

import pytest

from fleetplan.catalog.catalog import bundled_catalog
from fleetplan.catalog.hardware import HardwareConfig
from fleetplan.replica.priors import ideal_parts, kv_capacity_tokens, prior_params
from fleetplan.replica.protocol import replay
from fleetplan.workload.lengths import protocol_length_model

LLAMA = "Meta-Llama-3-8B-Instruct"  # hidden 4096, 32 layers, 8 KV heads of 128
GIB = 1024**3


def _parts(config: str) -> dict[str, float]:
    cat = bundled_catalog()
    return ideal_parts(cat.model(LLAMA), HardwareConfig.parse(config, cat))


def test_a_pp2_micro_batch_step_is_the_whole_model_plus_one_hand_over() -> None:
    """Two stages on two H100 SXM (NVLink-4, 900 GB/s in gpus.csv): each stage streams half
    the weights, one after the other, so the step's weights and FLOPs are one GPU's whole
    model; one hand-over of hidden_states + residual = 2 x 4096 x 2 bytes = 16384 bytes a
    token over 900 GB/s (1.8204e-8 s) and one NVLink transfer latency (8 us)."""
    one, two = _parts("1xH100-SXM"), _parts("2xH100-SXM+tp1pp2")
    assert two["weights"] == pytest.approx(one["weights"])
    assert two["tok"] == pytest.approx(one["tok"])
    assert two["comm_step"] - one["comm_step"] == pytest.approx(8e-6)
    assert two["comm_tok"] - one["comm_tok"] == pytest.approx(16384 / 900e9)
    assert pytest.approx(1.8204e-8, rel=1e-4) == 16384 / 900e9


def test_stages_across_nodes_hand_over_on_the_network() -> None:
    """16 H100 SXM on two nodes, TP 8 inside each node, two stages: the one hand-over
    crosses InfiniBand NDR (50 GB/s, 5 us: interconnects.csv): 16384 / 50e9 = 3.2768e-7 s a
    token; the all-reduces stay on NVLink, as on one node."""
    one_node = _parts("8xH100-SXM")
    ib = _parts("16xH100-SXM+tp8pp2n2+IB-NDR-400")
    assert ib["comm_step"] - one_node["comm_step"] == pytest.approx(5e-6)
    assert ib["comm_tok"] - one_node["comm_tok"] == pytest.approx(3.2768e-7)
    # unstated network: 100 GbE (12.5 GB/s, 30 us), a named assumption
    eth = _parts("16xH100-SXM+tp8pp2n2")
    assert eth["comm_step"] - one_node["comm_step"] == pytest.approx(30e-6)
    assert eth["comm_tok"] - one_node["comm_tok"] == pytest.approx(16384 / 12.5e9)


def test_tensor_parallel_across_nodes_all_reduces_on_the_network() -> None:
    """TP 16 over two nodes of 8: 64 all-reduces a step (2 x 32 layers), each NVLink's 8 us
    plus the network's latency twice (100 GbE: 2 x 30 us) = 68 us; a token's bytes
    64 x 4096 x 2 x (2 x 15 / 16) over 12.5 GB/s."""
    p = _parts("16xH100-SXM+tp16n2")
    assert p["comm_step"] == pytest.approx(64 * 68e-6)
    assert p["comm_tok"] == pytest.approx(64 * 4096 * 2 * (30 / 16) / 12.5e9)


def test_each_stage_holds_half_the_layers_and_half_the_weights() -> None:
    """Llama-3-8B on 2 x H100 SXM, pp 2, vLLM 0.8.5 defaults above 70 GiB (1024 sequences,
    8192 batched tokens, utilization 0.9): per GPU 80 GiB x 0.9 = 72 GiB, minus half the
    weights (8.03e9 B), activations 8192 x (4 x 4096 + 2 x 14336) x 2 B + 1024 x 128256 x 4 B
    and 1.2 GiB of non-torch memory; a token's KV on one GPU is 16 layers x 2 x 8 heads x 128
    x 2 B = 65536 B; whole blocks of 16."""
    cat = bundled_catalog()
    spec, hw = cat.model(LLAMA), HardwareConfig.parse("2xH100-SXM+tp1pp2", cat)
    act = 8192 * (4 * 4096 + 2 * 14336) * 2 + 1024 * 128256 * 4
    free = 72 * GIB - 16.06e9 / 2 - act - 1.2 * GIB
    expected = int(free // 65536) // 16 * 16
    got = kv_capacity_tokens(spec, hw, gpu_memory_utilization=0.9,
                             max_num_batched_tokens=8192, max_num_seqs=1024)
    assert got == expected
    # each of the two micro-batch engines: half the cache and half of max_num_seqs
    p = prior_params(spec, hw)
    assert p.kv_capacity_tokens == expected // 2 // 16 * 16
    assert p.max_num_seqs == 512
    assert p.config == "2xH100-SXM+tp1pp2"


@pytest.fixture(scope="module")
def engines():
    """One RTX 4090's engine and a two-stage server's micro-batch engine, both from the spec
    path (the same efficiency assumptions: only the layout differs)."""
    cat = bundled_catalog()
    spec = cat.model("DeepSeek-R1-Distill-Qwen-1.5B")
    return (prior_params(spec, HardwareConfig.parse("1xRTX-4090", cat)),
            prior_params(spec, HardwareConfig.parse("2xRTX-4090+tp1pp2", cat)))


def _throughput(p, concurrency: int) -> float:
    lm = protocol_length_model(mean_input=200, mean_output=100)
    return replay(p, rate=math.inf, num_prompts=4 * concurrency, max_concurrency=concurrency,
                  lengths=lm, seeds=(0,))["output_throughput"]


def test_at_high_load_two_stages_give_about_twice_one_micro_batch_engine(engines) -> None:
    """64 requests in flight keep both micro-batches full with 32 each: twice what one GPU
    gives with 32 in flight, less the hand-overs (each micro-batch's step is one GPU's plus a
    PCIe transfer). Against one GPU with all 64 there is no such gain: each micro-batch streams
    the weights again (docs/replica-model.md)."""
    one, pp2 = engines
    ratio = _throughput(pp2, 64) / _throughput(one, 32)
    assert 1.9 < ratio < 2.0


def test_at_concurrency_one_the_pipeline_does_not_help(engines) -> None:
    """One request in flight: one micro-batch, the other stage waits (the bubble); the step
    is one GPU's plus a hand-over, so no faster than one GPU."""
    one, pp2 = engines
    ratio = _throughput(pp2, 1) / _throughput(one, 1)
    assert 0.9 < ratio <= 1.0


def test_plain_names_stay_byte_identical() -> None:
    cat = bundled_catalog()
    for name in ("2xRTX-4090", "1xH100-PCIe", "8xH100-SXM"):
        assert HardwareConfig.parse(name, cat).name == name
    assert HardwareConfig.parse("8xH100-SXM+tp8", cat).name == "8xH100-SXM"


def test_validate_replays_a_pipeline_parallel_server(cli, foreign_run) -> None:
    f = str(foreign_run("pp.json"))
    res = cli("validate", f, "--gpu", "H100-SXM", "--gpu-count", "8", "--tp", "4", "--pp", "2",
              "--format", "json")
    assert res.exit_code == 0, res.stderr
    (run,) = json.loads(res.stdout)["runs"]
    assert run["config"] == "8xH100-SXM+tp4pp2" and run["calibrated"] is False
    assert float(run["metrics"]["output_throughput"]["predicted"]) > 0


def test_validate_refuses_a_layout_that_does_not_add_up(cli, foreign_run) -> None:
    f = str(foreign_run("pp.json"))
    res = cli("validate", f, "--gpu", "H100-SXM", "--gpu-count", "8", "--tp", "3", "--pp", "2",
              "--format", "json")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "--tp 3 x --pp 2 does not divide --gpu-count 8" in res.stderr


def test_a_stated_max_num_seqs_is_shared_by_the_micro_batches() -> None:
    """max_num_seqs=64 on a two-stage server: vLLM caps the running requests of both batches
    in flight together, so each micro-batch engine runs at most 32."""
    from fleetplan.replica.server_params import apply_stated

    cat = bundled_catalog()
    spec = cat.model(LLAMA)
    pp2 = prior_params(spec, HardwareConfig.parse("2xH100-SXM+tp1pp2", cat))
    assert apply_stated(pp2, {"max_num_seqs": 64}).max_num_seqs == 32
    one = prior_params(spec, HardwareConfig.parse("1xH100-SXM", cat))
    assert apply_stated(one, {"max_num_seqs": 64}).max_num_seqs == 64
