"""The plug-in registries: one per family, at the bottom of the package, duplicates refused.

What a user relies on: a second member of a taken name is refused where it is registered, with
both members named; an unknown name fails with the valid ones; a registry reads the same
(members and their order) whichever module a process imported first; and the scenario schema
validates against the registries without importing the fleet or the optimizer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest

from fleetplan.errors import UnknownNameError
from fleetplan.fleet.routing import Router, register_router
from fleetplan.profiles.formats import FORMATS, IngestFormat, ingest_format, register_format
from fleetplan.registry.base import Registry
from fleetplan.registry.solvers import SOLVERS, register_solver
from fleetplan.workload.arrivals import ARRIVALS, ArrivalProcess, register_arrivals


def _run(code: str) -> object:
    """``code``'s last line printed as JSON, run in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# --- duplicates are refused, naming both --------------------------------------------------------


def test_a_second_routing_policy_of_a_name_is_refused_naming_both() -> None:
    class Again(Router):
        pass

    with pytest.raises(ValueError) as e:
        register_router("planned")(Again)
    msg = str(e.value)
    assert "routing policy 'planned' is already registered" in msg
    assert "fleetplan.fleet.routing.Planned" in msg and "Again" in msg
    assert Again.__dict__.get("name") is None  # refused before anything was set on it


def test_a_second_arrival_process_of_a_name_is_refused_naming_both() -> None:
    class Poisson(ArrivalProcess):
        process: Literal["gamma"] = "gamma"

    with pytest.raises(ValueError) as e:
        register_arrivals(Poisson)
    msg = str(e.value)
    assert "arrival process 'gamma' is already registered" in msg
    assert "fleetplan.workload.arrivals.GammaArrivals" in msg and "Poisson" in msg
    assert ARRIVALS["gamma"].__name__ == "GammaArrivals"


def test_a_second_solver_of_a_name_is_refused_whatever_its_case() -> None:
    with pytest.raises(ValueError, match="solver 'cbc' is already registered"):
        register_solver("CBC", "COIN_CMD")
    assert SOLVERS["cbc"].pulp_name == "PULP_CBC_CMD"


def test_a_second_ingest_format_of_a_name_is_refused_naming_both() -> None:
    def read_mine(obj, src, opt):  # type: ignore[no-untyped-def]
        return {}

    with pytest.raises(ValueError) as e:
        ingest_format("guidellm", detect=lambda obj: False)(read_mine)
    msg = str(e.value)
    assert "ingest format 'guidellm' is already registered" in msg
    assert "fleetplan.profiles.guidellm.parse_report" in msg and "read_mine" in msg
    with pytest.raises(ValueError, match="ingest format 'vllm' is already registered"):
        register_format(IngestFormat("vllm", lambda obj: False, read_mine))
    assert FORMATS["vllm"].parse.__module__ == "fleetplan.profiles.ingest"


def test_unknown_names_fail_with_the_valid_ones() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown ingest format vlm; did you mean vllm\? "
                                               r"\(valid: guidellm, vllm\)"):
        FORMATS.lookup("vlm")


# --- the providers: loaded on first read, first in order, whatever was imported first ------------


@pytest.fixture
def widgets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Registry[object]]:
    """A registry of its own (``reg_holder_t``) whose built-in member lives in a provider
    module (``reg_provider_t``) that imports the registry."""
    (tmp_path / "reg_holder_t.py").write_text(
        "from fleetplan.registry.base import Registry\n"
        "REG = Registry('widget', providers=('reg_provider_t',))\n")
    (tmp_path / "reg_provider_t.py").write_text(
        "from reg_holder_t import REG\n\n\n@REG.register('builtin')\ndef builtin():\n"
        "    return 'b'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import reg_holder_t

    yield reg_holder_t.REG
    for name in ("reg_holder_t", "reg_provider_t"):
        sys.modules.pop(name, None)


def test_the_providers_are_imported_on_the_first_read_not_before(widgets) -> None:
    assert "reg_provider_t" not in sys.modules
    assert "builtin" in widgets
    assert "reg_provider_t" in sys.modules and widgets["builtin"]() == "b"


def test_a_users_member_comes_after_the_built_ins_and_cannot_take_their_names(widgets) -> None:
    def mine() -> str:
        return "m"

    widgets.add("mine", mine)  # the first registration loads the providers first
    assert list(widgets) == ["builtin", "mine"]
    with pytest.raises(ValueError, match=r"widget 'builtin' is already registered "
                                         r"\(reg_provider_t\.builtin\); refused .*mine"):
        widgets.add("builtin", mine)
    del widgets["mine"]
    assert list(widgets) == ["builtin"]


@pytest.mark.parametrize("first", ["fleetplan.profiles.guidellm", "fleetplan.profiles.ingest",
                                   "fleetplan.profiles.formats"])
def test_ingest_formats_are_tried_in_one_order_whatever_was_imported_first(first: str) -> None:
    """The first format that recognises a record reads it: vllm before guidellm in every
    process, as before the registry moved."""
    got = _run(f"import json, {first}\nfrom fleetplan.profiles.formats import FORMATS\n"
               "print(json.dumps(list(FORMATS)))")
    assert got == ["vllm", "guidellm"]


def test_the_scenario_validates_against_the_registries_without_importing_the_optimizer() -> None:
    """The schema imports registries, never the fleet or the optimizer: loading the scenario
    package imports neither, and a scenario naming a routing policy and a solver validates
    (the routing registry loads its provider, the fleet's routing module, then)."""
    code = (
        "import json, sys\n"
        "import fleetplan.scenario\n"
        "before = sorted(m for m in sys.modules if m.startswith(('fleetplan.fleet', "
        "'fleetplan.optimize')))\n"
        "from fleetplan.scenario import SolverSettings\n"
        "from fleetplan.scenario.model import Scenario\n"
        "field = Scenario.model_fields['routing']\n"
        "union = field.metadata[0]\n"
        "policy = union.validate('slo-aware')\n"
        "solver = SolverSettings('cbc').pulp_name\n"
        "after = sorted(m for m in sys.modules if m.startswith('fleetplan.optimize'))\n"
        "print(json.dumps([before, type(policy).__name__, solver, after]))")
    before, policy, solver, after = _run(code)  # type: ignore[misc]
    assert before == []
    assert policy == "SloAwarePolicy" and solver == "PULP_CBC_CMD"
    assert after == []
