"""``scripts/eval_external.py`` refuses what the replica model does not describe, one line
each, and replays the rest: an MoE model served data-parallel (vLLM steps its ranks' expert
layers together) is refused; two servers of a model behind one endpoint are two replicas."""

from __future__ import annotations

from pathlib import Path

from script_modules import load_file

ROOT = Path(__file__).resolve().parents[2]


def test_data_parallel_moe_is_refused_and_two_instances_of_a_server_are_replayed() -> None:
    from fleetplan.profiles.external import load_external_runs

    ev = load_file("eval_external_refusals", ROOT / "scripts" / "eval_external.py")
    res = ev.Resolver()
    runs = load_external_runs().by_source()["4x3090-llm-benchmarks"]
    moe = [r for r in runs if r.model == "Intel/Qwen3.6-35B-A3B-int4-AutoRound"]
    two = [r for r in runs if r.model == "Avesed/Qwen3.6-27B-INT8-W8A8" and r.gpu_count == 4
           and r.tp == 2]
    assert moe and all(r.dp == 2 for r in moe) and two
    for r in moe[:2]:
        why = ev.predict_row(r, res, engine_args=True).refused
        assert why is not None and why.startswith("data parallel 2 over an MoE model")
        assert "\n" not in why
    out = ev.predict_row(two[0], res, engine_args=True)
    assert out.refused is None and out.errors["throughput"] is not None
