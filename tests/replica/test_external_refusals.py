"""``scripts/eval_external.py`` refuses what the replica model does not describe, one line
each, and replays the rest: two servers of a model behind one endpoint are two replicas (an MoE
model's data-parallel ranks, which vLLM steps together: ``test_lockstep_moe.py``)."""

from __future__ import annotations

from pathlib import Path

from script_modules import load_file

ROOT = Path(__file__).resolve().parents[2]


def test_two_instances_of_a_server_are_replayed_as_two_replicas() -> None:
    from fleetplan.profiles.external import load_external_runs

    ev = load_file("eval_external_refusals", ROOT / "scripts" / "eval_external.py")
    res = ev.Resolver()
    runs = load_external_runs().by_source()["4x3090-llm-benchmarks"]
    two = [r for r in runs if r.model == "Avesed/Qwen3.6-27B-INT8-W8A8" and r.gpu_count == 4
           and r.tp == 2]
    assert two
    out = ev.predict_row(two[0], res, engine_args=True)
    assert out.refused is None and out.config == "4xRTX-3090+tp2dp2"
    assert out.errors["throughput"] is not None


def test_a_timed_concurrency_point_sends_the_waves_that_start_in_its_time() -> None:
    # tp-ab-p2p states "20 s per point": a closed loop of N in flight starts N a wave for 20 s,
    # the requests in flight then finish; a wave longer than the point is the only one
    ev = load_file("eval_external_timed", ROOT / "scripts" / "eval_external.py")
    assert ev.timed_prompts(64, 20.0, 50.0) == (64, 1)
    assert ev.timed_prompts(4, 20.0, 4.5) == (20, 5)
    assert ev.timed_prompts(16, 20.0, 10.0) == (32, 2)
    from fleetplan.profiles.external import load_external_runs

    res = ev.Resolver()
    runs = [r for r in load_external_runs().by_source()["4x3090-llm-benchmarks"]
            if r.dataset == "tp-ab-p2p:aggregate" and r.model == "Qwen/Qwen3.6-27B-FP8"]
    by_n = {r.load_value: ev.predict_row(r, res, engine_args=True) for r in runs}
    # 64 prompts of 512 tokens take far longer than 20 s on 4 x RTX 3090: one wave
    assert "64 per wave x 1 (the campaign's 20 s per point)" in by_n[64].notes
    assert any(n.startswith("4 per wave x ") for n in by_n[4].notes)
    # a campaign that states no time keeps the closed loop of 4 N
    other = next(r for r in load_external_runs().by_source()["4x3090-llm-benchmarks"]
                 if (r.dataset or "").startswith("nvfp4-driver") and r.load_value == 16)
    assert ev.timed_point(other) is None
