"""A plan of a latent-attention model (DeepSeek-R1) takes its margins and band notes from such
models' runs (the ``mla`` row of ``data/spec_errors.json``'s external fold, issue 41), not from
the other MoE models': vLLM served DeepSeek-R1 1.4-7 x slower than the spec path predicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetplan._notes import datasheet_band
from fleetplan.catalog import bundled_catalog
from fleetplan.catalog.models import ModelSpec
from fleetplan.optimize.confidence import margins, spec_error
from fleetplan.optimize.measure_next import capacity_factors
from fleetplan.optimize.model_band import pool_band
from fleetplan.scenario import scenario_from_dict

ROOT = Path(__file__).resolve().parents[2]
R1 = ROOT / "data" / "external" / "configs" / "deepseek-ai--DeepSeek-R1"
GPT_OSS = ROOT / "data" / "external" / "configs" / "openai--gpt-oss-20b"


def _external(metric: str, key: str) -> dict:
    table = json.loads((ROOT / "data" / "spec_errors.json").read_text())
    return table["folds"]["external"][key][metric]


def test_each_band_reader_takes_the_latent_attention_row() -> None:
    ttft, thr = _external("ttft_p99_ms", "mla"), _external("request_throughput", "mla")
    # measured = predicted / (1 + e): the band's ends are 1 / (1 + e90) and 1 / (1 + e10)
    lo, hi, _doc = datasheet_band("DeepSeek-R1", "H200", moe=True, mla=True)
    assert (lo, hi) == (pytest.approx(1 / (1 + ttft["p90"])), pytest.approx(1 / (1 + ttft["p10"])))
    moe_lo, moe_hi, _ = datasheet_band("DeepSeek-R1", "H200", moe=True)
    assert (moe_lo, moe_hi) != (lo, hi)
    low, high, basis = capacity_factors("DeepSeek-R1", "H200", moe=True, mla=True)
    assert (low, high) == (pytest.approx(1 / (1 + thr["p90"])),
                           pytest.approx(1 / (1 + thr["p10"])))
    assert "latent-attention models" in basis
    assert "latent-attention" in spec_error("8xH200", "H200", 0.9, moe=True, mla=True).source


def test_a_deepseek_plan_reads_it_where_a_gpt_oss_plan_does_not() -> None:
    r1 = ModelSpec.from_hf_config(R1, name="DeepSeek-R1")
    gpt = ModelSpec.from_hf_config(GPT_OSS, name="gpt-oss-20b")
    cat = bundled_catalog().extend(models=[r1, gpt])
    assert "latent-attention models" in pool_band("DeepSeek-R1", "8xH200", cat).basis
    assert "latent-attention" not in pool_band("gpt-oss-20b", "8xH200", cat).basis
    sc = scenario_from_dict({
        "model_config": str(R1),
        "classes": [{"name": "chat", "rate_rps": 1, "slo": {"ttft_p99_ms": 3000},
                     "input_tokens": {"dist": "fixed", "value": 300},
                     "output_tokens": {"dist": "fixed", "value": 50}}],
        "candidates": ["8xH200"],
        "sim": {"duration_s": 60, "warmup_s": 10, "seed": 3, "replications": 1}})
    m = margins(sc, ["8xH200"], 0.9).configs["8xH200"]
    assert m.calibrated is False and "latent-attention models" in m.source
