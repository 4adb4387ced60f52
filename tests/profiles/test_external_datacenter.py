"""The data-centre external fixture (``data/external/gpu-conc.csv``, issue 41): public runs on
GPUs of two vendors load as attributed records on GPUs the catalog now holds, and keep only the
levels at which the source's harness really held N requests in flight."""

from __future__ import annotations

import pytest

from fleetplan.catalog import bundled_catalog
from fleetplan.profiles.external import external_dir, load_external_runs


@pytest.fixture(scope="module")
def runs():
    got = load_external_runs(external_dir() / "gpu-conc.csv")
    assert got.errors == ()
    return got.runs


def test_rows_load_attributed_on_catalog_gpus_of_two_vendors(runs) -> None:
    cat = bundled_catalog()
    assert {r.gpu for r in runs} == {"H100-PCIe", "H200", "B200", "MI300X"}
    vendors = {cat.gpu(r.gpu).vendor_name.split()[0] for r in runs}
    assert vendors == {"NVIDIA", "AMD"}
    for r in runs:
        assert r.source == "gpu-conc" and len(r.commit) == 40 and r.run_id
        assert r.source_file.startswith(r.run_id.split("/")[0] + "/benchmark_summary_")
        assert (r.model, r.gpu_count, r.tp, r.engine) == ("openai/gpt-oss-20b", 1, 1, "vllm")
        assert r.input_tokens_mean is None  # the source records no prompt length


def test_only_the_closed_loop_levels_are_kept(runs) -> None:
    # read off the source's files by hand: at these levels completed req/s x mean latency is
    # N; at the others the harness's one-request-per-0.5 s feed, not N, set the load
    kept = {(r.gpu, int(r.load_value or 0)) for r in runs}
    expected = {(g, n) for g in ("H100-PCIe", "H200", "B200") for n in (1, 4, 8, 16)}
    assert kept == expected | {("MI300X", n) for n in (1, 4, 8, 16, 32)}
    for r in runs:
        assert r.load_kind == "concurrency"
        in_flight = (r.completed_rps or 0) * (r.e2e_mean_ms or 0) / 1000
        assert in_flight == pytest.approx(r.load_value, rel=0.1)


def test_derived_figures_agree_with_the_source_totals(runs) -> None:
    for r in runs:
        assert r.completed_rps is not None and r.duration_s is not None
        assert r.completed_rps * r.duration_s == pytest.approx(r.num_prompts, rel=0.01)
        assert r.output_tokens_mean is not None and r.output_tok_s is not None
        assert r.output_tokens_mean == pytest.approx(r.output_tok_s / r.completed_rps,
                                                     rel=1e-3)
        assert 0 < r.output_tokens_mean <= r.output_tokens_requested == 1000
        # one request at a time decodes its ~1,000 tokens in about its whole latency
        if r.load_value == 1:
            decode_ms = (r.e2e_p50_ms or 0) - (r.ttft_p50_ms or 0)
            assert decode_ms / r.output_tokens_mean == pytest.approx(r.tpot_p50_ms, rel=0.1)


def test_amd_latency_tables_give_consistent_burst_rows() -> None:
    got = load_external_runs(external_dir() / "rocm-vllm-mi300x-latency.csv")
    assert got.errors == () and len(got.runs) >= 300
    models = {"amd/Llama-3.1-70B-Instruct-FP8-KV", "amd/Llama-3.1-405B-Instruct-FP8-KV"}
    assert {r.model for r in got.runs} == models
    assert {r.config for r in got.runs} == {"8xMI300X"}
    assert len({r.engine_version for r in got.runs}) >= 5  # vLLM 0.6.6 ... 0.10.0
    seen = set()
    for r in got.runs:
        assert r.load_kind == "burst" and r.tp == 8 and r.source_file == "docs/dev-docker/README.md"
        assert r.input_tokens_mean in (128, 2048) and r.output_tokens_mean == 2048
        b, secs = r.num_prompts or 0, (r.e2e_p50_ms or 0) / 1000
        # every request of the batch is the same length: the rates follow from B and latency
        assert r.output_tok_s == pytest.approx(b * 2048 / secs, rel=1e-3)
        assert r.total_tok_s == pytest.approx(b * (2048 + r.input_tokens_mean) / secs, rel=1e-3)
        key = (r.model, b, r.input_tokens_mean, r.e2e_p50_ms)
        assert key not in seen  # a republished value is kept once
        seen.add(key)
    # within one measurement set a larger batch never finishes sooner
    sets: dict[tuple[str, str, float], list[tuple[int, float]]] = {}
    for r in got.runs:
        sets.setdefault((r.commit, r.model or "", r.input_tokens_mean or 0), []).append(
            (r.num_prompts or 0, r.e2e_p50_ms or 0))
    for points in sets.values():
        lat = [ms for _, ms in sorted(points)]
        assert lat == sorted(lat)
