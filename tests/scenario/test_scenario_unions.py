"""Registry-backed scenario fields: arrival processes and routing policies by name or as objects
with parameters, candidates by name, solver names checked against the solver registry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import numpy as np
import pulp
import pytest
import yaml
from fleet_cases import base_dict, make, refusal
from pydantic import Field

from fleetplan.errors import FleetplanError, InputError
from fleetplan.fleet import ROUTERS, Router, register_router, simulate
from fleetplan.fleet.routing import RoutingPolicy
from fleetplan.fleet.traffic import build_traffic
from fleetplan.optimize.solve import solver_settings
from fleetplan.optimize.solvers import resolve_solver
from fleetplan.scenario import load_scenario, scenario_from_dict, scenario_json_schema
from fleetplan.workload.arrivals import ARRIVALS, ArrivalProcess, register_arrivals

GAMMA = {"process": "gamma", "rate_rps": 2.0, "burstiness": 0.5}


def _with_arrivals(arrivals: dict, i: int = 0) -> dict:
    d = base_dict()
    d["classes"][i].pop("rate_rps")
    d["classes"][i]["arrivals"] = arrivals
    return d


# --- arrivals ----------------------------------------------------------------------------------


def test_arrivals_object_and_shorthand_are_the_same_class_and_the_same_traffic() -> None:
    short = base_dict()
    short["classes"][0]["burstiness"] = 0.5
    a, b = scenario_from_dict(short), scenario_from_dict(_with_arrivals(GAMMA))
    assert a.classes[0] == b.classes[0]
    assert b.classes[0].rate_rps == 2.0 and b.classes[0].burstiness == 0.5
    ta = build_traffic(a, np.random.SeedSequence(1), [(8192, "x")] * 2)
    tb = build_traffic(b, np.random.SeedSequence(1), [(8192, "x")] * 2)
    assert np.array_equal(ta.arrival_s, tb.arrival_s)
    # copies keep working (a what-if run re-validates the dumped class)
    again = b.with_updates(routing="round-robin")
    assert again.classes == b.classes


def test_profile_and_trace_processes_take_their_parameters(tmp_path: Path) -> None:
    sc = scenario_from_dict(_with_arrivals({"process": "profile",
                                            "rate_profile_rps": [1.0] * 12 + [3.0] * 12}))
    assert sc.classes[0].rate_profile_rps is not None and sc.classes[0].mean_rate_rps() == 2.0
    d = base_dict()
    for c in d["classes"]:
        for k in ("rate_rps", "input_tokens", "output_tokens"):
            c.pop(k)
        c["arrivals"] = {"process": "trace", "file": "t.csv", "scale_to_rps": 3.0}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(d))
    c = load_scenario(tmp_path / "s.yaml").classes[0]
    # the file is relative to the scenario, as with the trace shorthand
    assert c.trace is not None and c.trace.file == str(tmp_path.resolve() / "t.csv")
    assert c.arrival_kind == "trace" and c.mean_rate_rps() == 3.0


@pytest.mark.parametrize(("arrivals", "expected"), [
    ({"process": "poisson", "rate_rps": 2},
     "s.yaml: classes[0].arrivals.process = 'poisson': unknown arrival process poisson "
     "(valid: gamma, profile, trace)"),
    ({"rate_rps": 2}, "classes[0].arrivals: give `process` (valid: gamma, profile, trace)"),
    ({"process": "gamma", "rate_rps": -1}, "classes[0].arrivals.rate_rps = -1: Input should be"),
    ({"process": "gamma", "rate_rps": "8"}, "classes[0].arrivals.rate_rps = '8'"),
    ({"process": "gamma", "rate_rps": 2, "shape": 3},
     "classes[0].arrivals.shape = 3: unknown field of gamma (valid: process, rate_rps, "
     "burstiness)"),
    ({"process": "profile", "rate_profile_rps": [1.0] * 23}, "arrivals.rate_profile_rps"),
    ("gamma", "classes[0].arrivals = 'gamma': an arrival process is a mapping with `process`"),
])
def test_bad_arrivals_are_one_line_naming_field_value_and_valid_names(arrivals,
                                                                      expected: str) -> None:
    assert expected in refusal(_with_arrivals(arrivals))


def test_arrivals_exclude_the_shorthands() -> None:
    d = _with_arrivals(GAMMA)
    d["classes"][0]["rate_rps"] = 2.0
    assert "give exactly one of rate_rps, rate_profile_rps, trace or arrivals (got rate_rps " \
           "and arrivals)" in refusal(d)
    d = _with_arrivals({"process": "gamma", "rate_rps": 2.0})
    d["classes"][0]["burstiness"] = 0.5
    assert "give it inside (arrivals.burstiness)" in refusal(d)


@pytest.fixture
def evenly_spaced() -> Iterator[type[ArrivalProcess]]:
    @register_arrivals
    class Evenly(ArrivalProcess):
        """Deterministic arrivals, one every 1/rate seconds from t=0."""

        process: Literal["test-evenly"] = "test-evenly"
        rate_rps: float = Field(gt=0)

        def times(self, duration_s: float, rng: np.random.Generator, *,
                  start_hour: int = 0) -> np.ndarray:
            return np.arange(0.0, duration_s, 1.0 / self.rate_rps)

    yield Evenly
    del ARRIVALS["test-evenly"]


def test_a_registered_arrival_process_is_valid_drawn_and_in_the_schema(evenly_spaced) -> None:
    sc = scenario_from_dict(_with_arrivals({"process": "test-evenly", "rate_rps": 0.5}))
    assert sc.classes[0].arrival_kind == "test-evenly"
    t = build_traffic(sc, np.random.SeedSequence(0), [(8192, "x")] * 2)
    assert np.array_equal(t.arrival_s[t.cls == 0], np.arange(0.0, 90.0, 2.0))
    # written back as the process (it has no shorthand) and read again
    assert sc.with_updates(routing="round-robin").classes == sc.classes
    assert "test-evenly" in refusal(_with_arrivals({"process": "nope"}))
    defs = scenario_json_schema()["$defs"]
    assert "Evenly" in defs
    with pytest.raises(ValueError, match="already registered"):
        register_arrivals(evenly_spaced)


def test_schema_lists_every_registered_process() -> None:
    schema = scenario_json_schema()
    arrivals = schema["$defs"]["TrafficClass"]["properties"]["arrivals"]
    listed = [o for o in arrivals["anyOf"] if "oneOf" in o][0]
    assert set(listed["discriminator"]["mapping"]) == set(ARRIVALS)


# --- routing -----------------------------------------------------------------------------------


def test_routing_by_name_or_object_is_one_policy() -> None:
    a, b = make(routing="slo-aware"), make(routing={"policy": "slo-aware"})
    assert a.routing == b.routing and b.routing.policy == "slo-aware"
    assert make().model_dump()["routing"] == "least-outstanding"
    assert scenario_from_dict({k: v for k, v in base_dict().items() if k != "routing"}) \
        .routing.policy == "least-outstanding"


@pytest.mark.parametrize(("routing", "expected"), [
    ({"policy": "random"}, "s.yaml: routing.policy = 'random': unknown routing policy random "
                           "(valid: least-outstanding, planned, round-robin, slo-aware)"),
    ({"policy": "slo-aware", "headroom": 2},
     "routing.headroom = 2: unknown field of slo-aware (valid: policy)"),
    ({}, "routing: give `policy` (valid: least-outstanding"),
    (3, "routing = 3: a routing policy is a name or a mapping with `policy`"),
])
def test_bad_routing_is_one_line(routing, expected: str) -> None:
    assert expected in refusal(base_dict(routing=routing))


def test_schema_routing_values_come_from_the_registry() -> None:
    routing = scenario_json_schema()["properties"]["routing"]
    names = [o for o in routing["oneOf"] if o.get("type") == "string"][0]["enum"]
    assert names == sorted(ROUTERS)
    assert routing["default"] == "least-outstanding"


class OnePoolPolicy(RoutingPolicy):
    """Every request to the first replica of one pool."""

    policy: Literal["test-one-pool"] = "test-one-pool"
    pool: int = Field(ge=0, description="index of the pool in the fleet")


@pytest.fixture
def one_pool() -> Iterator[type[Router]]:
    @register_router("test-one-pool")
    class OnePool(Router):
        Params = OnePoolPolicy

        def route(self, cls: int, input_tokens: int) -> int:
            return self.ctx.pool_replicas[self.params.pool][0]  # type: ignore[attr-defined]

    yield OnePool
    del ROUTERS["test-one-pool"]


def test_a_registered_policy_takes_its_parameters_into_the_simulation(one_pool) -> None:
    res = simulate(make(routing={"policy": "test-one-pool", "pool": 1}))
    for c in res.classes:
        assert c.pools == {"2xRTX-4090@EU27": 1.0}
    assert "routing.pool = -1" in refusal(
        base_dict(routing={"policy": "test-one-pool", "pool": -1}))
    assert "routing.pool: required field is missing" in refusal(
        base_dict(routing={"policy": "test-one-pool"}))
    defs = scenario_json_schema()["$defs"]
    assert defs["OnePoolPolicy"]["properties"]["pool"]["minimum"] == 0


def test_params_must_name_their_policy() -> None:
    with pytest.raises(ValueError, match="must be Literal"):
        register_router("test-other-name")(type("Other", (Router,), {"Params": OnePoolPolicy}))
    assert "test-other-name" not in ROUTERS


# --- candidates --------------------------------------------------------------------------------


def test_candidates_by_name_are_candidates_with_defaults() -> None:
    by_name = make(candidates=["1xh100-pcie", "2xRTX-4090"])
    as_records = make(candidates=[{"config": "1xH100-PCIe"}, {"config": "2xRTX-4090"}])
    assert by_name.candidates == as_records.candidates
    assert by_name.candidates is not None and by_name.candidates[0].regions == ["EU27"]
    mixed = make(candidates=["2xRTX-4090", {"config": "1xH100-PCIe", "regions": ["FRA"]}])
    assert mixed.candidates is not None and mixed.candidates[1].regions == ["FRA"]
    assert "s.yaml: candidates[1] = '1xH100-PCI': unknown GPU H100-PCI; did you mean" in refusal(
        base_dict(candidates=["2xRTX-4090", "1xH100-PCI"]))
    assert "candidates = []" in refusal(base_dict(candidates=[]))


# --- solver ------------------------------------------------------------------------------------


def test_solver_defaults_are_the_documented_ones() -> None:
    s = solver_settings(make())
    assert (s.name.lower(), s.time_limit_s, s.gap) == ("cbc", 10.0, 0.01)
    assert solver_settings(make(), "cbc").time_limit_s == 10.0


@pytest.mark.skipif("GLPK_CMD" in pulp.listSolvers(onlyAvailable=True), reason="GLPK installed")
def test_an_unavailable_solver_fails_at_load_as_the_optimizer_would() -> None:
    msg = refusal(base_dict(solver={"name": "glpk"}))
    with pytest.raises(FleetplanError) as e:
        resolve_solver("glpk")
    assert msg == f"s.yaml: solver.name = 'glpk': {e.value}"
    assert "glpk is not available on this machine" in msg and "available: cbc" in msg


def test_solver_settings_built_directly_fail_as_input_errors() -> None:
    from fleetplan.optimize import SolverSettings

    with pytest.raises(InputError, match=r"^solver\.gap = 1\.5: "):
        SolverSettings("cbc", gap=1.5)
    with pytest.raises(InputError, match="unknown solver gurobee"):
        SolverSettings("gurobee")


def test_scenarios_pickle_for_worker_processes() -> None:
    import pickle

    for sc in (make(), make(routing={"policy": "slo-aware"}),
               scenario_from_dict(_with_arrivals(GAMMA))):
        again = pickle.loads(pickle.dumps(sc))
        assert again == sc and again.routing.policy == sc.routing.policy
