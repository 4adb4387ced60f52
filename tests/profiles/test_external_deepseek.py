"""The DeepSeek-R1 external fixtures (issue 41): a latent-attention MoE model on data-centre GPUs
of two vendors, as dstack and GPUStack measured it with vLLM (``data/external/
dstack-deepseek-r1.csv``, ``gpustack-deepseek-r1-h200.csv``). The rows load attributed, and each
row's figures agree with one another as a benchmark's must (the builder copies them, so these
checks catch a column read into the wrong field)."""

from __future__ import annotations

import pytest

from fleetplan.catalog import bundled_catalog
from fleetplan.profiles.external import external_dir, load_external_runs


@pytest.fixture(scope="module")
def runs():
    got = load_external_runs(external_dir() / "dstack-deepseek-r1.csv",
                             external_dir() / "gpustack-deepseek-r1-h200.csv")
    assert got.errors == ()
    return got.runs


def test_rows_load_attributed_on_catalog_gpus_of_two_vendors(runs) -> None:
    cat = bundled_catalog()
    by_source = {r.source for r in runs}
    assert by_source == {"dstack-deepseek-r1", "gpustack-deepseek-r1-h200"}
    assert {cat.gpu(r.gpu).vendor_name.split()[0] for r in runs} == {"NVIDIA", "AMD"}
    for r in runs:
        assert len(r.commit) == 40 and r.run_id and r.source_file
        assert r.model in ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-R1-0528")
        assert (r.gpu_count, r.tp, r.engine, r.quant) == (8, 8, "vllm", "fp8")
    # the servers' own versions, as the sources print them
    assert {(r.gpu, r.engine_version) for r in runs} == {
        ("H200", "0.7.4.dev181+gf35f8e22"), ("MI300X", "0.7.3.dev138+g21f6ca217"),
        ("H200", "0.11.0")}


def test_each_row_agrees_with_itself(runs) -> None:
    for r in runs:
        n = r.num_prompts
        assert n and r.completed_rps and r.duration_s and r.output_tok_s
        # completed / duration is the request rate, output tokens / duration the token rate
        assert r.completed_rps * r.duration_s == pytest.approx(n, rel=0.02), r.run_id
        assert r.completed_rps * r.output_tokens_mean == pytest.approx(r.output_tok_s,
                                                                       rel=0.02), r.run_id
        assert r.ttft_p50_ms <= r.ttft_p99_ms and r.tpot_p50_ms <= r.tpot_p99_ms


def test_the_dstack_sweeps_are_the_readmes_grid(runs) -> None:
    # concurrency 4..128 at 3,200 / 800 tokens, and 1,600 / 3,200 / 6,400 output tokens at 128,
    # on both GPUs; prompts of exactly 3,200 random tokens, every reply its full length
    grid = {(r.gpu, int(r.load_value or 0), int(r.output_tokens_mean or 0))
            for r in runs if r.source == "dstack-deepseek-r1"}
    expected = {(g, c, 800) for g in ("H200", "MI300X") for c in (4, 8, 16, 32, 64, 128)}
    expected |= {(g, 128, o) for g in ("H200", "MI300X") for o in (1600, 3200, 6400)}
    assert grid == expected
    for r in runs:
        if r.source == "dstack-deepseek-r1":
            assert (r.input_tokens_mean, r.num_prompts, r.prefix_cache) == (3200, 500, "cold")
