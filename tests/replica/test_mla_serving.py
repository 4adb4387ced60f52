"""A multi-head latent attention model (DeepSeek-V2-Lite) on the vLLM release that serves it.

Expected values are worked out by hand from the released sdists (``fleetplan/replica/
mla_serving.py`` cites the lines): up to 0.7.0 vLLM caches every head's K and V
(``2 x heads x (qk_nope + qk_rope)`` elements a token and layer, V padded to the K size); 0.7.1
and 0.7.2 keep the latent only for unquantized, FP8 and all-FP8 compressed-tensors checkpoints;
0.7.1 to 0.7.3 force chunked prefill and prefix caching off where they keep it; from 0.8.0 a GPU
server keeps the latent and the version's defaults."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from fleetplan.catalog import HardwareConfig
from fleetplan.catalog.models import ModelSpec
from fleetplan.replica.mla_serving import mla_serving, served_spec
from fleetplan.replica.priors import prior_params
from fleetplan.replica.protocol import replay
from fleetplan.replica.server_params import v0_budget
from fleetplan.replica.steady import steady_state

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "hf-configs"
LITE = ModelSpec.from_hf_config(CONFIGS / "DeepSeek-V2-Lite")  # 27 layers, 16 heads, bf16
H100 = HardwareConfig.parse("1xH100-SXM")
# per token and layer: the latent (512 + 64) against every head's K and V (2 x 16 x 192)
LATENT, PER_HEAD = 512 + 64, 2 * 16 * (128 + 64)


def _awq(tmp_path: Path) -> ModelSpec:
    folder = tmp_path / "DeepSeek-V2-Lite-AWQ"
    shutil.copytree(CONFIGS / "DeepSeek-V2-Lite", folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": 64}
    (folder / "config.json").write_text(json.dumps(cfg))
    return ModelSpec.from_hf_config(folder)


def test_the_release_decides_what_is_cached(tmp_path: Path) -> None:
    awq = _awq(tmp_path)
    for version, model, latent in (("0.6.6", LITE, False), ("0.7.0", LITE, False),
                                   ("0.7.1", LITE, True), ("0.7.2", awq, False),
                                   ("0.7.3", awq, True), ("0.8.0", awq, True),
                                   ("0.10.1", LITE, True)):
        assert served_spec(model, version).is_mla is latent, (version, model.served_dtype)
    assert mla_serving(LITE, None) is None  # no version: the study's 0.8.5
    dense = ModelSpec.from_hf_config(CONFIGS / "Llama-3.1-8B-Instruct")
    assert mla_serving(dense, "0.7.0") is None and served_spec(dense, "0.7.0") is dense


def test_a_cache_of_every_head_holds_about_eleven_times_fewer_tokens() -> None:
    old = prior_params(LITE, H100, engine_version="0.7.0")
    new = prior_params(LITE, H100, engine_version="0.8.5")
    # the same memory plan, 2 x 16 x 192 elements a token and layer against 576
    assert new.kv_capacity_tokens / old.kv_capacity_tokens == pytest.approx(
        PER_HEAD / LATENT, rel=0.02)
    assert "caches every head" not in new.source and "every head's K and V" in old.source


def test_0_7_3_schedules_whole_prompts_without_a_prefix_cache() -> None:
    p = prior_params(LITE, H100, engine_version="0.7.3")
    assert (p.chunked_prefill, p.prefix_caching) == (False, False)
    assert "forces chunked prefill and prefix caching off" in p.source
    assert p.model_dump()["prefix_caching"] is False
    q = prior_params(LITE, H100, engine_version="0.8.5")
    assert (q.chunked_prefill, q.prefix_caching) == (True, True)
    assert "prefix_caching" not in q.model_dump()  # dumps as before the field existed
    # 0.7.0 has no latent and so nothing forced: 0.7's V0 defaults (whole prompts up to 32K
    # of context, chunks of 2048 beyond; the model's context is 163,840 tokens)
    r = prior_params(LITE, H100, engine_version="0.7.0")
    assert (r.chunked_prefill, r.prefix_caching) == (True, True)


def test_a_stated_long_context_does_not_bring_chunks_back() -> None:
    args = {"max_model_len": 65536}
    assert v0_budget("0.7.3", args, LITE) == (2048, False)
    assert v0_budget("0.7.0", args, served_spec(LITE, "0.7.0")) == (2048, True)
    assert v0_budget("0.7.3", {"max_model_len": 8192}, LITE) == (8192, False)


def test_warm_prompts_are_prefilled_whole_where_the_cache_is_forced_off() -> None:
    lengths = ([1500] * 16, [64] * 16)
    kw = dict(rate=2.0, num_prompts=16, request_lengths=lengths, seeds=(0,))
    off = prior_params(LITE, H100, engine_version="0.7.3")
    cold, warm = (replay(off, warm_prefix_cache=w, **kw) for w in (False, True))
    assert warm["ttft_p50_ms"] == pytest.approx(cold["ttft_p50_ms"], rel=1e-12)
    on = off.with_(prefix_caching=True)
    assert replay(on, warm_prefix_cache=True, **kw)["ttft_p50_ms"] < 0.5 * cold["ttft_p50_ms"]


def test_a_stated_hit_share_is_not_served_without_a_prefix_cache() -> None:
    off = prior_params(LITE, H100, engine_version="0.7.3")
    kw = dict(rate=4.0, duration_s=40.0, warmup_s=10.0, seed=3)
    fresh, stated = (steady_state(off, prefix_cache_hit=h, **kw) for h in (0.0, 0.9))
    assert stated.prefix_cache_hit == 0.0
    assert np.isclose(stated.ttft_p50_ms, fresh.ttft_p50_ms, rtol=1e-12)



def test_the_capacity_search_brackets_such_a_server_without_the_stated_hit() -> None:
    from fleetplan.optimize.bracket import bracket
    from fleetplan.workload.lengths import protocol_length_model

    off = prior_params(LITE, H100, engine_version="0.7.3")
    lengths = protocol_length_model()
    assert bracket(off, lengths, 0.9) == bracket(off, lengths, 0.0)
    on = off.with_(prefix_caching=True)
    hit, fresh = bracket(on, lengths, 0.9), bracket(on, lengths, 0.0)
    assert hit is not None and fresh is not None
    assert hit.saturation_rps > fresh.saturation_rps



def test_asking_for_a_warm_cache_on_such_a_server_is_refused_in_one_line() -> None:
    from fleetplan.errors import InputError
    from fleetplan.validate.prediction import PredictRequest, run_prediction

    asks = (PredictRequest(model=LITE, config="1xH100-SXM", rate=4.0, engine_version="0.7.3",
                           seeds=1, warm_prefix_cache=True),
            PredictRequest(model=LITE, config="1xH100-SXM", rate=4.0, engine_version="0.7.3",
                           steady=True, prefix_cache_hit=0.5))
    for request, flag in zip(asks, ("warm_prefix_cache", "prefix_cache_hit"), strict=True):
        with pytest.raises(InputError) as err:
            run_prediction(request)
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith(f"{flag} contradicts engine_version 0.7.3")
    # the same question of a release that keeps the cache is answered
    fine = PredictRequest(model=LITE, config="1xH100-SXM", rate=4.0, engine_version="0.8.5",
                          seeds=1, num_prompts=20, warm_prefix_cache=True)
    assert run_prediction(fine).params.prefix_caching


def test_a_calibration_of_such_a_server_is_named_when_no_version_is_given(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from fleetplan.errors import InputError
    from fleetplan.validate import prediction
    from fleetplan.validate.prediction import PredictRequest, run_prediction

    # a pair calibrated on runs of vLLM 0.7.3 keeps that release's missing prefix cache
    fitted = prior_params(LITE, H100, engine_version="0.7.3").with_(calibrated=True)
    monkeypatch.setattr(prediction, "resolve_params", lambda *a, **k: fitted)
    request = PredictRequest(model=LITE, config="1xH100-SXM", rate=4.0, seeds=1,
                             warm_prefix_cache=True)
    with pytest.raises(InputError) as err:
        run_prediction(request)
    assert str(err.value).startswith(
        "warm_prefix_cache contradicts the calibration of 1xH100-SXM: that vLLM release")


def test_a_0_7_4_nightly_chunks_the_latent_prompts_that_0_7_3_would_take_whole() -> None:
    # 0.7.4 was never released; its nightlies carry MLA's chunked prefill (vLLM pull request
    # 12639, days after 0.7.3), as dstack's DeepSeek-R1 server on 0.7.4.dev181 shows: it served
    # 3,200-token prompts under V0's 2,048-token budget for a context over 32K
    nightly, release = "0.7.4.dev181+gf35f8e22", "0.7.3.dev138+g21f6ca217"
    assert mla_serving(LITE, nightly) is None and mla_serving(LITE, release) is not None
    p = prior_params(LITE, H100, engine_version=nightly)
    assert (p.chunked_prefill, p.prefix_caching, p.max_num_batched_tokens) == (True, True, 2048)
    assert "forces chunked prefill" not in p.source
    q = prior_params(LITE, H100, engine_version=release)
    assert (q.chunked_prefill, q.prefix_caching) == (False, False)
    long = ([3200] * 8, [32] * 8)
    got = replay(p, rate=float("inf"), num_prompts=8, request_lengths=long, seeds=(0,))
    assert got["request_throughput"] > 0 and got["ttft_p50_ms"] > 0
