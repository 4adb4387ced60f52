"""Verification on an executor gives the checks of one replication after another (issue 10,
part 5: the replications of a one-hour plan are spread over the workers; results independent of
the worker count)."""

from __future__ import annotations

import json
from pathlib import Path

from fleetplan.fleet import simulate
from fleetplan.optimize.executors import get_executor
from fleetplan.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]


def test_replications_on_two_workers_give_the_same_bytes() -> None:
    sc = load_scenario(ROOT / "examples" / "hybrid-chat-batch.yaml")
    sc = sc.with_updates(sim={"duration_s": 90, "warmup_s": 20, "seed": 3, "replications": 3})
    serial = json.dumps(simulate(sc).to_dict(), sort_keys=True)
    for spec in ("serial", "local:2"):
        got = json.dumps(simulate(sc, executor=get_executor(spec)).to_dict(), sort_keys=True)
        assert got == serial, spec
