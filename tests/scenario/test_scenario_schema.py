"""The scenario schema: valid files load; every bad input is one line naming path and value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from fleet_cases import base_dict, make, refusal

from fleetplan.errors import InputError
from fleetplan.scenario import (
    load_scenario,
    parse_fleet,
    scenario_from_dict,
    scenario_json_schema,
)

ROOT = Path(__file__).resolve().parents[2]


def test_issue_example_loads_with_defaults() -> None:
    sc = make()
    assert sc.market == "alternative"
    assert sc.embodied.include and sc.embodied.lifetime_years == 4
    assert sc.fleet is not None and sc.fleet[1].region == "EU27"
    assert sc.classes[0].arrival_kind == "rate"
    # a class without lengths takes the measured protocol's
    d = base_dict()
    del d["classes"][0]["input_tokens"], d["classes"][0]["output_tokens"]
    lm = scenario_from_dict(d).classes[0].length_model()
    assert "protocol" in lm.source and lm.max_total == 2047


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda d: d["classes"][1]["slo"].update(ttft_p99_ms=-5),
     "s.yaml: classes[1].slo.ttft_p99_ms = -5: Input should be greater than 0"),
    (lambda d: d["classes"][1].update(slo={"ttft_ms": 100}),
     "classes[1].slo.ttft_ms = 100: unknown field (valid: ttft_p99_ms"),
    (lambda d: d["classes"][1].update(slo={}), "classes[1].slo: an SLO needs at least one"),
    (lambda d: d.update(model="Qwen-99B"), "model = 'Qwen-99B': unknown model Qwen-99B"),
    (lambda d: d["fleet"][0].update(config="1xH100-PCI"),
     "fleet[0].config = '1xH100-PCI': unknown GPU H100-PCI; did you mean H100-PCIe?"),
    (lambda d: d["fleet"][1].update(region="Mars"), "fleet[1].region = 'Mars': unknown region"),
    (lambda d: d.update(routing="random"),
     "routing = 'random': unknown routing policy random (valid: least-outstanding, planned, "
     "round-robin, slo-aware)"),
    (lambda d: d.update(colour="red"), "colour = 'red': unknown field"),
    (lambda d: d["classes"][0].update(rate_rps=0), "classes[0].rate_rps = 0: Input should be"),
    (lambda d: d["classes"][0].update(rate_rps=-2), "classes[0].rate_rps = -2"),
    (lambda d: d["classes"][0].update(rate_rps="8"), "classes[0].rate_rps = '8': Input should"),
    (lambda d: d["classes"][0].update(input_tokens={"dist": "lognormal", "mean": 10, "cv": -1}),
     "classes[0].input_tokens.cv = -1"),
    (lambda d: d["classes"][0].update(trace="t.csv"),
     "classes[0]: give exactly one of rate_rps, rate_profile_rps, trace or arrivals (got "
     "rate_rps and trace)"),
    (lambda d: d["classes"][0].pop("rate_rps"), "(got none)"),
    (lambda d: d["classes"][0].update(rate_rps=None, rate_profile_rps=[1.0] * 23),
     "classes[0].rate_profile_rps"),
    (lambda d: d["fleet"][0].pop("count"), "fleet[0].count: required field is missing"),
    (lambda d: d["fleet"][0].update(count=0), "fleet[0].count = 0"),
    (lambda d: d["sim"].update(warmup_s=100), "sim: warmup_s(=100) must be < duration_s(=90)"),
    (lambda d: d["classes"][1].update(name="chat"), "class names must be unique"),
    (lambda d: d["classes"][0].update(pin=["4xRTX-4090"]),
     "classes[0].pin: 4xRTX-4090 names no pool of the fleet"),
    (lambda d: d.update(routing="planned"), "classes[0].split: routing planned needs a split"),
    (lambda d: d["classes"][0].update(split={"1xH100-PCIe": 0.5, "2xRTX-4090": 0.4}),
     "shares sum to 0.9, not 1"),
    (lambda d: d.update(carbon={"max_g_per_mtok": 5, "max_kg_per_day": 2}),
     "carbon: give exactly one of max_g_per_mtok or max_kg_per_day"),
    (lambda d: d.update(availability={"EU27": {"H100-PCIe": -1}}),
     "EU27.H100-PCIe: -1 must be a whole number of GPUs"),
    (lambda d: d.update(availability={"H100-PCI": 4}), "unknown GPU H100-PCI"),
    (lambda d: d.update(commitment={"mode": "base-plus-on-demand",
                                    "on_demand_price_factor": 20}),
     "commitment.on_demand_price_factor = 20"),
    (lambda d: d.update(solver={"name": "magic"}), "solver.name = 'magic': unknown solver"),
    (lambda d: d.update(redundancy=-1), "redundancy = -1"),
    (lambda d: d.update(budget_usd_per_hour=0), "budget_usd_per_hour = 0"),
    (lambda d: d.update(market="black"), "market = 'black': unknown market"),
    (lambda d: d.update(prices_usd_per_gpu_hour={"H100-PCIe": 0}),
     "prices_usd_per_gpu_hour.H100-PCIe = 0: Input should be greater than 0"),
    (lambda d: d.update(classes=[]), "classes = []: List should have at least 1 item"),
    (lambda d: d.update(fleet=[]), "fleet = []: List should have at least 1 item"),
])
def test_bad_input_names_path_and_value(mutate, expected: str) -> None:
    d = base_dict()
    mutate(d)
    assert expected in refusal(d)


def test_optimizer_fields_validate() -> None:
    sc = make(candidates=[{"config": "1xH100-PCIe", "regions": ["EU27", "FRA"],
                           "max_replicas": 64}],
              availability={"H100-PCIe": 8, "EU27": {"RTX-4090": 16}},
              budget_usd_per_hour=50, redundancy=1, carbon={"max_kg_per_day": 3},
              commitment={"mode": "fixed-peak", "on_demand_price_factor": 1.5},
              solver={"name": "HiGHS", "time_limit_s": 5, "gap": 0.02})
    assert sc.availability == {"H100-PCIe": 8, "EU27": {"RTX-4090": 16}}
    assert sc.candidates is not None and sc.candidates[0].regions == ["EU27", "FRA"]
    assert sc.carbon is not None and sc.carbon.max_g_per_mtok is None
    # a mode alone is that mode with the defaults, as routing: NAME is
    assert make(commitment="base-plus-on-demand").commitment == make(
        commitment={"mode": "base-plus-on-demand"}).commitment
    assert "'per-hour', 'fixed-peak' or 'base-plus-on-demand'" in refusal(
        base_dict(commitment="weekly"))
    # a record given as a bare value is refused naming the record's fields, not pydantic's
    # "instance of CarbonCap"
    assert refusal(base_dict(carbon=30)).endswith(
        "carbon = 30: expected a mapping of fields (max_g_per_mtok, max_kg_per_day)")
    assert refusal(base_dict(grid_g_per_kwh=242)).endswith(
        "grid_g_per_kwh = 242: expected a mapping (name: value, one per line in YAML)")


def test_yaml_and_json_files_give_the_same_scenario(tmp_path: Path) -> None:
    d = base_dict()
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(d))
    (tmp_path / "s.json").write_text(json.dumps(d))
    assert load_scenario(tmp_path / "s.yaml") == load_scenario(tmp_path / "s.json")


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = base_dict()
    bad["classes"][1]["slo"]["ttft_p99_ms"] = 0
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(bad))
    with pytest.raises(InputError, match=r"bad\.yaml: classes\[1\]\.slo\.ttft_p99_ms = 0"):
        load_scenario(p)
    p.write_text("model: [unclosed\n")
    with pytest.raises(InputError, match=r"bad\.yaml: not valid YAML"):
        load_scenario(p)
    with pytest.raises(InputError, match=r"none\.yaml: no such scenario file"):
        load_scenario(tmp_path / "none.yaml")
    with pytest.raises(InputError, match="a directory, not a scenario file"):
        load_scenario(tmp_path)
    p.write_bytes(b"model: caf\xe9\n")
    with pytest.raises(InputError, match=r"bad\.yaml: not UTF-8 text \(byte 10\)"):
        load_scenario(p)
    j = tmp_path / "bad.json"
    j.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match=r"bad\.json: nested too deeply"):
        load_scenario(j)
    j.write_text('{"model": }')
    with pytest.raises(InputError, match=r"bad\.json: not JSON \(line 1, column 11"):
        load_scenario(j)


def test_trace_paths_are_relative_to_the_scenario_file(tmp_path: Path) -> None:
    d = base_dict()
    d["classes"][0] = {"name": "chat", "trace": "t.csv"}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(d))
    sc = load_scenario(tmp_path / "s.yaml")
    assert sc.classes[0].trace is not None
    assert Path(sc.classes[0].trace.file) == tmp_path.resolve() / "t.csv"
    assert d["classes"][0]["trace"] == "t.csv"  # the caller's data is not mutated


def test_trace_class_refuses_synthetic_fields() -> None:
    d = base_dict()
    d["classes"][0] = {"name": "chat", "trace": {"file": "t.csv"}, "burstiness": 0.5}
    assert "burstiness does not apply to a trace class" in refusal(d)


def test_parse_fleet() -> None:
    pools = parse_fleet("2x1xH100-PCIe+4x2xRTX-4090@FRA")
    assert [(p.config, p.count, p.region) for p in pools] == [
        ("1xH100-PCIe", 2, "EU27"), ("2xRTX-4090", 4, "FRA")]
    # a configuration with a layout keeps its own '+' (pools start with a replica count)
    pools = parse_fleet("2x8xrtx-4090+tp4pp2@FRA~spot+1x16xH100-SXM+tp8pp2n2+IB-NDR-400"
                        "+3x1xH100-PCIe")
    assert [(p.config, p.count, p.region, p.market) for p in pools] == [
        ("8xRTX-4090+tp4pp2", 2, "FRA", "spot"),
        ("16xH100-SXM+tp8pp2n2+IB-NDR-400", 1, "EU27", None), ("1xH100-PCIe", 3, "EU27", None)]
    for bad, msg in (("2xH100", "expected <replicas>x<config>"),
                     ("2x8xRTX-4090+fast", r"after '\+' expected a layout"),
                     ("2x1xH100-PCIe@NOPE", "unknown region NOPE"),
                     ("0x1xH100-PCIe", "greater than or equal to 1")):
        with pytest.raises(InputError, match=msg):
            parse_fleet(bad)


def test_with_fleet_revalidates_pins() -> None:
    sc = make(classes=[{**base_dict()["classes"][0], "pin": ["2xRTX-4090"]}])
    with pytest.raises(InputError, match="pin: 2xRTX-4090 names no pool"):
        sc.with_fleet(parse_fleet("2x1xH100-PCIe"))


def test_json_schema_lists_the_binding_fields() -> None:
    schema = scenario_json_schema()
    props = schema["properties"]
    for k in ("model", "classes", "fleet", "routing", "prices_usd_per_gpu_hour",
              "grid_g_per_kwh", "sim", "market", "embodied", "candidates", "availability",
              "budget_usd_per_hour", "redundancy", "carbon", "commitment", "solver"):
        assert k in props
    cls = schema["$defs"]["TrafficClass"]["properties"]
    for k in ("rate_rps", "rate_profile_rps", "trace", "burstiness", "input_tokens",
              "output_tokens", "slo"):
        assert k in cls
    assert schema["additionalProperties"] is False


def test_examples_validate() -> None:
    for name in ("hybrid-chat-batch.yaml", "azure-trace.yaml"):
        load_scenario(ROOT / "examples" / name)


def test_copies_keep_trace_classes_valid() -> None:
    d = base_dict()
    d["classes"][0] = {"name": "chat", "trace": {"file": "/data/t.csv", "scale_to_rps": 3}}
    sc = scenario_from_dict(d)
    again = sc.with_fleet(parse_fleet("1x1xH100-PCIe")).with_updates(routing="round-robin")
    assert again.classes == sc.classes and again.routing.policy == "round-robin"
    assert again.sim == sc.sim
