"""``import fleetplan`` and the CLI's root load no numerical library (fast ``--help``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("pulp", "simpy", "scipy", "matplotlib", "pandas", "aiohttp")


@pytest.mark.parametrize("stmt", ["import fleetplan", "import fleetplan.cli.app",
                                  "from fleetplan.cli.app import main"])
def test_import_loads_no_heavy_library(stmt: str) -> None:
    code = f"import sys, json; {stmt}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    loaded = {m.split(".")[0] for m in json.loads(out)}
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


def test_root_help_lists_every_command_without_importing_them() -> None:
    code = ("import sys, json\nfrom fleetplan.cli.app import main\ncode = main(['--help'])\n"
            "print(json.dumps([code, sorted(sys.modules)]), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True)
    code_, modules = json.loads(proc.stderr.strip().splitlines()[-1])
    assert code_ == 0
    from fleetplan.cli.app import COMMANDS

    for name in COMMANDS:
        assert f"\n  {name} " in proc.stdout, name
    assert not [m for m in modules if m.startswith("fleetplan.cli.") and m.endswith("_cmd")]
    assert {m.split(".")[0] for m in modules}.isdisjoint(HEAVY)


def test_public_names_still_import_from_the_package() -> None:
    import fleetplan
    from fleetplan import Scenario, solve
    from fleetplan.optimize import solve as solve2
    from fleetplan.scenario import Scenario as Scenario2

    assert solve is solve2 and Scenario is Scenario2
    for name in fleetplan.__all__:
        assert getattr(fleetplan, name) is not None, name
    assert set(fleetplan.__all__) <= set(dir(fleetplan))
    with pytest.raises(AttributeError, match="no_such_name"):
        fleetplan.no_such_name  # noqa: B018


def test_root_summaries_are_the_commands_own_first_sentence() -> None:
    """The root listing is written in app.py (so --help imports nothing); it must say what each
    command's own help says."""
    from fleetplan.cli.app import COMMANDS, load_command

    for name, summary in COMMANDS.items():
        assert load_command(name).get_short_help_str(10_000) == summary, name


def test_a_mistyped_command_gets_a_suggestion(cli) -> None:
    r = cli("solv", "x.yaml")
    assert r.exit_code == 2 and "Did you mean 'solve'?" in r.stderr
    assert cli("cache", "info").exit_code == 0  # the real commands still load after it
