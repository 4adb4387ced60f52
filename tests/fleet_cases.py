"""Small, fast scenarios for the tests of the scenario schema and the fleet simulator.

Shared by ``tests/scenario``, ``tests/fleet`` and ``tests/replica``: it sits at the top of
``tests/``, which pytest puts on ``sys.path`` for the root ``conftest.py``, so ``from
fleet_cases import ...`` works from any folder (and from a single test file run alone)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fleetplan.errors import InputError
from fleetplan.scenario import Scenario, scenario_from_dict

MODEL = "DeepSeek-R1-Distill-Qwen-14B"


def base_dict(**over: Any) -> dict[str, Any]:
    """Two classes on a small H100 + RTX 4090 fleet, 90 s simulated, fixed lengths."""
    d: dict[str, Any] = {
        "model": MODEL,
        "classes": [
            {"name": "chat", "rate_rps": 2.0, "slo": {"ttft_p99_ms": 150},
             "input_tokens": {"dist": "fixed", "value": 100},
             "output_tokens": {"dist": "fixed", "value": 50}},
            {"name": "batch", "rate_rps": 2.0, "slo": {"ttft_p99_ms": 2000},
             "input_tokens": {"dist": "fixed", "value": 300},
             "output_tokens": {"dist": "fixed", "value": 50}},
        ],
        "fleet": [{"config": "1xH100-PCIe", "count": 1}, {"config": "2xRTX-4090", "count": 2}],
        "routing": "least-outstanding",
        "sim": {"duration_s": 90, "warmup_s": 10, "seed": 3, "replications": 2},
    }
    d.update(copy.deepcopy(over))
    return d


def make(**over: Any) -> Scenario:
    return scenario_from_dict(base_dict(**over))




def refusal(data: dict[str, Any]) -> str:
    """The one-line error ``data`` (named ``s.yaml``) is refused with."""
    with pytest.raises(InputError) as e:
        scenario_from_dict(data, "s.yaml")
    msg = str(e.value)
    assert "\n" not in msg
    return msg
