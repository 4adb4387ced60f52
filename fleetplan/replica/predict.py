"""One call from names to a prediction: :func:`predict` (model, configuration, rate).

It resolves the replica parameters (calibrated, or spec-based and marked ``calibrated: false``)
and either replays vLLM's benchmark (a burst of ``num_prompts`` requests, the protocol of the
measured runs) or, with ``steady=True``, simulates sustained load (what planning uses).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fleetplan.replica.params import replica_params
from fleetplan.replica.protocol import ReplayResult, replay
from fleetplan.replica.steady import SteadyResult, steady_state
from fleetplan.workload.lengths import LengthModel


def predict(model: str, config: str, *, rate: float, steady: bool = False,
            num_prompts: int = 200, burstiness: float = 1.0,
            lengths: LengthModel | None = None, calibration: str | Path | None = None,
            **options: Any) -> ReplayResult | SteadyResult:
    """Predict ``model`` on ``config`` at ``rate`` req/s.

    ``steady=False``: :func:`~fleetplan.replica.protocol.replay` of a ``num_prompts`` burst
    (extra ``options``: ``seeds``, ``arrival_seed``, ``warm_prefix_cache``, ``max_concurrency``).
    ``steady=True``: :func:`~fleetplan.replica.steady.steady_state` (extra ``options``:
    ``duration_s``, ``warmup_s``, ``seed``).
    """
    params = replica_params(model, config, calibration=calibration)
    if steady:
        return steady_state(params, rate=rate, lengths=lengths, burstiness=burstiness, **options)
    return replay(params, rate=rate, num_prompts=num_prompts, burstiness=burstiness,
                  lengths=lengths, **options)
