"""`fleetplan simulate` and `fleetplan schema`: examples run; errors are one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from fleet_cases import base_dict

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def test_hybrid_example_runs_with_fleet_override(cli) -> None:
    r = cli("simulate", str(EXAMPLES / "hybrid-chat-batch.yaml"), "--format", "json",
            "--replications", "1", "--fleet", "2x1xH100-PCIe+3x2xRTX-4090")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert [c["name"] for c in out["classes"]] == ["chat", "batch"]
    assert [(p["config"], p["count"]) for p in out["pools"]] == [("1xH100-PCIe", 2),
                                                                ("2xRTX-4090", 3)]
    assert out["seed"] == 7 and out["replications"] == 1
    assert out["g_co2_embodied_per_hour"] == 0.0  # the example excludes embodied carbon
    assert r.stderr == ""  # no progress bar when stderr is not a terminal


def test_azure_trace_example_runs(cli) -> None:
    r = cli("simulate", str(EXAMPLES / "azure-trace.yaml"), "--quiet")
    assert r.exit_code == 0, r.stderr
    assert "conv" in r.stdout and "cost: $" in r.stdout
    assert "dropped" in r.stdout  # prompts over the 4096-token window, counted


def test_json_is_byte_identical_across_runs(cli, tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(base_dict()))
    a = cli("simulate", str(p), "--format", "json")
    b = cli("simulate", str(p), "--format", "json")
    assert a.exit_code == 0 and a.stdout == b.stdout
    c = cli("simulate", str(p), "--format", "json", "--seed", "99")
    assert c.stdout != a.stdout and json.loads(c.stdout)["seed"] == 99


def test_csv_has_one_row_per_class(cli, tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(base_dict()))
    r = cli("simulate", str(p), "--format", "csv")
    assert r.exit_code == 0
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("name,requests,rate_rps") and len(lines) == 3


def test_bad_inputs_exit_2_with_one_line(cli, tmp_path: Path) -> None:
    d = base_dict()
    d["classes"][1]["slo"]["ttft_p99_ms"] = -1
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(d))
    r = cli("simulate", str(p))
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines() == [
        f"fleetplan: error: {p}: classes[1].slo.ttft_p99_ms = -1: Input should be greater "
        "than 0"]
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(base_dict()))
    for args, expected in (
        (("--fleet", "2x1xH100-PCIe@Atlantis"), "unknown region Atlantis"),
        (("--fleet", "two H100s"), "expected <replicas>x<config>"),
        (("--fleet", "1x1xRTX-4090"), "does not fit on 1xRTX-4090"),
    ):
        r = cli("simulate", str(good), *args)
        assert r.exit_code == 2 and expected in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_schema_prints_the_json_schema(cli) -> None:
    r = cli("schema")
    assert r.exit_code == 0
    schema = json.loads(r.stdout)
    assert schema["title"] == "Scenario" and "classes" in schema["required"]


def test_executor_runs_the_replications_in_parallel_with_the_same_bytes(
        cli, tmp_path: Path) -> None:
    """--executor local:2: 3 replications on 2 workers (the third in parts of pools under
    planned routing) print what one after another prints."""
    d = base_dict(routing="planned")
    d["classes"][0]["split"] = {"1xH100-PCIe": 0.7, "2xRTX-4090": 0.3}
    d["classes"][1]["split"] = {"1xH100-PCIe": 0.2, "2xRTX-4090": 0.8}
    d["sim"]["replications"] = 3
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(d))
    serial = cli("simulate", str(p), "--format", "json")
    parallel = cli("simulate", str(p), "--format", "json", "--executor", "local:2")
    assert serial.exit_code == 0 and parallel.exit_code == 0, parallel.stderr
    assert parallel.stdout == serial.stdout
    assert json.loads(parallel.stdout)["replications"] == 3
    bad = cli("simulate", str(p), "--executor", "local:two")
    assert bad.exit_code == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        "fleetplan: error: --executor: executor local:two: the worker count must be a whole "
        "number"]


def test_a_class_that_misses_on_one_of_its_pools_names_it(cli, tmp_path: Path) -> None:
    """A class split over an H100 and two 2 x RTX 4090 replicas misses its 150 ms P99: the
    table says on which pool, and the JSON has each pool's share of the class."""
    d = base_dict(routing="planned")
    d["classes"][0]["split"] = {"1xH100-PCIe": 0.5, "2xRTX-4090@EU27": 0.5}
    d["classes"][1]["split"] = {"2xRTX-4090@EU27": 1.0}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(d))
    r = cli("simulate", str(p), "--quiet")
    assert r.exit_code == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("class chat by pool"))
    assert "met on 1xH100-PCIe@EU27" in line and "missed on 2xRTX-4090@EU27" in line
    assert "class batch by pool" not in r.stdout  # met, and on one pool
    out = json.loads(cli("simulate", str(p), "--format", "json").stdout)
    chat = out["classes"][0]["by_pool"]
    assert chat["1xH100-PCIe@EU27"]["met"] is True and chat["2xRTX-4090@EU27"]["met"] is False
    assert sum(v["requests"] for v in chat.values()) == out["classes"][0]["requests"]


def test_a_class_failed_on_its_tpot_or_e2e_target_shows_that_target(cli, tmp_path: Path) -> None:
    """A class with a TPOT or end-to-end target that its simulation misses is NO beside a TTFT
    within its SLO: the table shows each target and the simulated P99 it was judged on, and
    the goodput as a share of requests (a 0.979 never reads 1.0)."""
    d = base_dict()
    d["classes"][0]["slo"] = {"ttft_p99_ms": 100000, "tpot_p99_ms": 1}
    d["classes"][1]["slo"] = {"ttft_p99_ms": 100000, "e2e_p99_ms": 1}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(d))
    r = cli("simulate", str(p), "--quiet", "--format", "json")
    out = {c["name"]: c for c in json.loads(r.stdout)["classes"]}
    table = cli("simulate", str(p), "--quiet").stdout
    header = next(x for x in table.splitlines() if "slo_ttft_p99_ms" in x)
    assert "tpot_p99_ms" in header and "slo_tpot_p99_ms" in header and "slo_e2e_p99_ms" in header
    for name, c in out.items():
        row = next(x for x in table.splitlines()
                   if x.count("\u2502") > 2 and x.split("\u2502")[1].strip() == name)
        assert c["slo_met"] is False and "NO" in row
        assert f"{100 * c['goodput_fraction']:.1f}%" in row
