"""A scenario candidate's ``server:`` record (issue 41, item 1): the engine settings of its
replicas reach the capacity the optimizer measures, the plan's pool record and the plan's
simulation; a capacity measured with other settings is never reused."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetplan.optimize.capacity_records import CapacityJob
from fleetplan.optimize.inputs import build_problem, candidate_params
from fleetplan.replica.params import replica_params
from fleetplan.scenario import scenario_from_dict
from fleetplan.workload.lengths import protocol_length_model

MODEL, CONFIG = "DeepSeek-R1-Distill-Qwen-14B", "1xH100-PCIe"
OUTPUT_TOKENS, RATE = 100, 4.0
SCENARIO: dict[str, Any] = {
    "model": MODEL,
    "classes": [{"name": "chat", "rate_rps": RATE, "slo": {"ttft_p99_ms": 1500},
                 "input_tokens": {"dist": "fixed", "value": 200},
                 "output_tokens": {"dist": "fixed", "value": OUTPUT_TOKENS}}],
    "market": "alternative",
    "sim": {"duration_s": 60, "warmup_s": 10, "seed": 3, "replications": 1},
    "capacity": {"duration_s": 60, "warmup_s": 10, "min_requests": 100, "seeds": 1},
}


def _scenario(server: dict[str, Any] | None) -> dict[str, Any]:
    cand: dict[str, Any] = {"config": CONFIG}
    if server is not None:
        cand["server"] = server
    return {**SCENARIO, "candidates": [cand]}


def _solve(cli: Any, tmp_path: Path, name: str, server: dict[str, Any] | None) -> dict[str, Any]:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(_scenario(server)))
    out = tmp_path / f"{name}.json"
    res = cli("solve", str(path), "--format", "json", "--no-timing", "-q", "--out", str(out))
    assert res.exit_code == 0, res.stderr
    return json.loads(out.read_text())


def _capacity(plan: dict[str, Any]) -> float:
    (cap,) = [c for c in plan["capacities"] if c["config"] == CONFIG]
    return float(cap["capacity_rps"])


def test_a_candidates_server_cap_lowers_its_capacity_and_solve_buys_more(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """max_num_seqs 4: a replica holds 4 requests at once, each for at least its 100 output
    tokens x the replica's shortest step (c_step, 18 ms): at most 4 / (100 x c_step) ~ 2.2
    req/s whatever the SLO, so 4 req/s need at least 2 replicas. Without the cap one replica
    carries far more (the engine's default of 1024 sequences). The plain solve runs first on
    the same cache folder: a capacity cached for the default settings must not answer."""
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(tmp_path / "cache"))
    plain = _solve(cli, tmp_path, "plain", None)
    capped = _solve(cli, tmp_path, "capped", {"max_num_seqs": 4})
    c_step = replica_params(MODEL, CONFIG).c_step
    bound = 4 / (OUTPUT_TOKENS * c_step)
    assert 0 < _capacity(capped) <= bound < _capacity(plain)
    n_plain = sum(e["count"] for e in plain["fleet"])
    n_capped = sum(e["count"] for e in capped["fleet"])
    assert n_capped >= math.ceil(RATE / bound) and n_capped > n_plain
    assert capped["verified"] and plain["verified"]
    # the pool record states the settings, only where the candidate did
    assert [e["server"] for e in capped["fleet"]] == [{"max_num_seqs": 4}]
    assert all("server" not in e for e in plain["fleet"])
    # ... and the plan says so, once, where a candidate states settings
    assert [n for n in capped["notes"] if "max_num_seqs=4" in n] == [
        f"{CONFIG} replicas run with max_num_seqs=4 (its candidate's server:): its capacities "
        "are measured and the plan simulated with these engine settings, which change what a "
        "replica holds at once, not what a token costs"]
    assert not [n for n in plain["notes"] if "replicas run with" in n]
    # the plan's simulation runs the capped servers: the plain plan's fleet, simulated with the
    # capped candidate, misses the SLO it met with default servers
    res = cli("simulate", str(tmp_path / "capped.yaml"), "--plan", str(tmp_path / "plain.json"),
              "--format", "json")
    assert res.exit_code == 0, res.stderr
    (cls,) = json.loads(res.stdout)["classes"]
    (met,) = plain["classes"]
    assert met["ttft_p99_ms"] <= 1500 < cls["ttft_p99_ms"]
    # ... and a plan's own pool record carries its settings into a replay under the scenario
    # without them
    res = cli("simulate", str(tmp_path / "plain.yaml"), "--plan", str(tmp_path / "capped.json"),
              "--format", "json")
    again = cli("simulate", str(tmp_path / "capped.yaml"), "--plan",
                str(tmp_path / "capped.json"), "--format", "json")
    assert res.exit_code == again.exit_code == 0, res.stderr + again.stderr
    assert json.loads(res.stdout)["classes"] == json.loads(again.stdout)["classes"]
    # a plan file's bad server record is one line naming the file's field and value
    for server, words in (({"max_num_seqs": 0}, ["fleet[0].server.max_num_seqs = 0", ">= 1"]),
                          ({"speed": 1}, ["fleet[0].server.speed = 1", "max_num_seqs"])):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({**capped, "fleet": [{**capped["fleet"][0], "server": server}]}))
        res = cli("simulate", str(tmp_path / "capped.yaml"), "--plan", str(bad))
        assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
        for w in [str(bad), *words]:
            assert w in res.stderr, res.stderr


def test_the_settings_are_part_of_every_capacity_cache_key() -> None:
    plain = scenario_from_dict(_scenario(None))
    capped = scenario_from_dict(_scenario({"max_num_seqs": 4}))
    p, q = candidate_params(plain, CONFIG, 0), candidate_params(capped, CONFIG, 0)
    assert p == replica_params(MODEL, CONFIG)  # no server: exactly the replica's parameters
    assert q.max_num_seqs == 4 and p.max_num_seqs != 4
    lengths = protocol_length_model()

    def job(params: Any) -> CapacityJob:
        return CapacityJob(MODEL, CONFIG, params, lengths, 1.0, 1500.0, None, None,
                           plain.capacity)

    assert job(p).key() != job(q).key()
    assert job(p).point_key(1.0) != job(q).point_key(1.0)


def test_a_bad_setting_the_mapping_refuses_names_the_candidate() -> None:
    """max_model_len beyond the model's context passes the bounds but not vLLM: the solve
    refuses it naming the candidate's field."""
    from fleetplan.errors import InputError

    sc = scenario_from_dict(_scenario({"max_model_len": 10**7}))
    with pytest.raises(InputError) as exc:
        build_problem(sc, cache_dir=False)
    msg = str(exc.value)
    assert "\n" not in msg and "candidates[0]" in msg and "max_model_len=10000000" in msg


@pytest.mark.parametrize(("server", "words"), [
    ({"max_num_seqs": 0}, ["candidates[0].server.max_num_seqs = 0", "must be >= 1"]),
    ({"max_num_seqs": 4.5}, ["candidates[0].server.max_num_seqs = 4.5", "whole number"]),
    ({"speed": 3}, ["candidates[0].server.speed = 3", "unknown field", "max_num_seqs"]),
    ({"gpu_memory_utilization": 1.5}, ["gpu_memory_utilization = 1.5", "<= 1"]),
    ({"enable_prefix_caching": "no"}, ["enable_prefix_caching = 'no'", "true or false"]),
    ({"max_num_seqs": 64, "max_num_batched_tokens": 32},
     ["candidates[0].server", "max_num_batched_tokens=32 is below max_num_seqs=64"]),
])
def test_a_bad_server_record_is_one_line_naming_file_field_and_value(
        cli, tmp_path: Path, server: dict[str, Any], words: list[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_scenario(server)))
    res = cli("solve", str(path), "--format", "json", "-q")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
    assert str(path) in res.stderr
    for w in words:
        assert w in res.stderr, res.stderr


def test_one_configuration_listed_twice_states_one_server(cli, tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**SCENARIO, "candidates": [
        {"config": CONFIG, "server": {"max_num_seqs": 4}}, {"config": CONFIG, "market": "spot"}]}))
    res = cli("solve", str(path), "--format", "json", "-q")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "candidates[1].server" in res.stderr and "candidates[0]" in res.stderr


def test_no_prefix_caching_beside_a_class_with_cached_prompts_is_refused(
        cli, tmp_path: Path) -> None:
    """enable_prefix_caching false changes no parameter: it holds only where no class states
    a share of its prompts cached, and contradicts one that does."""
    scenario = _scenario({"enable_prefix_caching": False})
    scenario["classes"] = [{**scenario["classes"][0], "prefix_cache_hit": 0.5}]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    res = cli("solve", str(path), "--format", "json", "-q")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
    assert ("candidates[0].server.enable_prefix_caching false contradicts "
            "classes[0].prefix_cache_hit 0.5") in res.stderr

