"""The step arithmetic the SimPy engine (:mod:`fleetplan.replica.engine`) and the compiled
steady-state loop (:mod:`fleetplan.replica.steady_loop`) share, written once.

Plain Python with no imports, so the engine needs no Numba; :mod:`fleetplan.replica.steady_arrays`
registers these functions for the compiled loop (``register_jitable``), and the loop's cache
folder is keyed on this file too (:data:`fleetplan.replica.steady_kernel.LOOP_SOURCES`).
"""

from __future__ import annotations

import math

#: tolerance on step and submission times (seconds)
EPS = 1e-12


def expert_time(c_exp: float, share: float, tokens: int) -> float:
    """A mixture-of-experts step's reads of routed experts beyond those one token routes to
    (``c_step`` holds those): ``tokens`` tokens routed uniformly, each to a ``share`` of a
    layer's routed experts, touch ``1 - (1 - share)^tokens`` of them, so the step reads
    ``c_exp`` (every routed expert once) times that less ``share``; 0 for a dense model
    (``c_exp`` 0) and for one token."""
    if c_exp <= 0.0 or tokens <= 1:
        return 0.0
    return c_exp * (1.0 - (1.0 - share) ** tokens - share)


def step_time(c_step: float, c_pf: float, c_seq: float, c_kv: float, prefill: int, n_dec: int,
              kv_read: int, c_exp: float = 0.0, share: float = 0.0) -> float:
    """The cost model's time of one step: ``prefill`` prompt tokens computed, ``n_dec`` decoders,
    ``kv_read`` KV tokens read, the routed experts the step's tokens touch
    (:func:`expert_time`)."""
    return (c_step + c_pf * prefill + c_seq * n_dec + c_kv * kv_read
            + expert_time(c_exp, share, prefill + n_dec))


def decode_plan(c_step: float, c_seq: float, c_kv: float, n_dec: int, s_off: int,
                step: int, c_exp: float = 0.0, share: float = 0.0) -> tuple[float, float]:
    """A run of decode-only steps from global step ``step``: ``(a, b)``, the first step's time
    and each later one's growth (every decoder reads one KV token more a step), the plan
    :func:`plan_duration` and :func:`steps_until` take."""
    return (c_step + c_seq * n_dec + c_kv * (s_off + n_dec * step)
            + expert_time(c_exp, share, n_dec), c_kv * n_dec)


def plan_duration(a: float, b: float, n: int) -> float:
    """Duration of the first ``n`` steps of a plan whose first step takes ``a`` and each later
    one ``b`` longer."""
    return n * a + b * n * (n - 1) / 2.0


def steps_until(a: float, b: float, dt: float) -> int:
    """Fewest steps (>= 1) of a plan (first step ``a``, growth ``b`` a step) whose cumulative
    duration reaches ``dt``."""
    if dt <= a + EPS:
        return 1
    if b <= 0:
        m = math.ceil(dt / a - 1e-9)
    else:
        qa, qb = b / 2.0, a - b / 2.0
        m = math.ceil((-qb + math.sqrt(qb * qb + 4 * qa * dt)) / (2 * qa) - 1e-9)
    m = max(m, 1)
    while m > 1 and (m - 1) * a + b * (m - 1) * (m - 2) / 2.0 >= dt - EPS:
        m -= 1
    while m * a + b * m * (m - 1) / 2.0 < dt - EPS:
        m += 1
    return m
