"""Gamma-renewal arrivals as vLLM's benchmark draws them, and the bound on arrivals per run.

Main entries: :func:`benchmark_arrivals` (N requests, the first at t=0, then gamma gaps: exactly
vLLM's ``get_request``), :func:`arrivals_until` (a stationary process over a time window),
:func:`gamma_gaps` and :func:`check_arrivals` (refuse a run over :data:`MAX_ARRIVALS` before
anything is drawn). Burstiness is the gamma shape: 1.0 is Poisson, < 1 burstier, > 1 smoother.
Every function takes a ``numpy.random.Generator``; none touches global random state. The
registry of arrival processes a scenario names is :mod:`fleetplan.workload.arrivals`.
"""

from __future__ import annotations

import math

import numpy as np

from fleetplan.errors import InputError, InputLimitError

__all__ = ["MAX_ARRIVALS", "MIN_BURSTINESS", "arrivals_until", "benchmark_arrivals",
           "check_arrivals", "gamma_gaps"]

MIN_BURSTINESS = 1e-3
"""Smallest gamma shape accepted: below it nearly every gap is zero and one gap holds the whole
window, so a run would need ~1/burstiness draws to cover it (1e-9: 5 GB; fit_trace's floor too)."""
MAX_ARRIVALS = 5_000_000
"""Most arrivals one run may draw (a class, or all classes together): refused before any array
is built, with the figure. The simulator holds ~400 bytes per request and replays ~3500 requests
a second on one core, so this bounds a run near 2 GB and half an hour."""


def _check(rate: float, burstiness: float) -> None:
    if not (rate > 0):
        raise InputError(f"rate(={rate!r}) must be > 0 requests per second")
    if not (burstiness >= MIN_BURSTINESS and math.isfinite(burstiness)):
        raise InputError(f"burstiness(={burstiness!r}) must be a finite number >= "
                         f"{MIN_BURSTINESS:g}")


def check_arrivals(expected: float, what: str) -> None:
    """Refuse a run whose expected arrivals (``what`` says how they were figured: ``rate_rps 4 x
    duration_s 600``) exceed :data:`MAX_ARRIVALS`, before anything is allocated."""
    if not expected <= MAX_ARRIVALS:
        raise InputLimitError(f"{what} = {expected:.4g} arrivals in one run, more than the "
                              f"{MAX_ARRIVALS:,} fleetplan simulates; shorten the run or lower "
                              "the rate")


def gamma_gaps(n: int, rate: float, burstiness: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` inter-arrival gaps (s) with mean ``1/rate`` and gamma shape ``burstiness``."""
    _check(rate, burstiness)
    if math.isinf(rate):
        return np.zeros(n)
    theta = 1.0 / (rate * burstiness)
    return rng.gamma(shape=burstiness, scale=theta, size=n)


def benchmark_arrivals(n: int, rate: float, burstiness: float,
                       rng: np.random.Generator) -> np.ndarray:
    """Send times of vLLM's benchmark: request 0 at t=0, then a gamma gap after each request."""
    if n < 1:
        raise InputError(f"num_prompts(={n}) must be >= 1")
    gaps = gamma_gaps(n - 1, rate, burstiness, rng)
    return np.concatenate([[0.0], np.cumsum(gaps)])


def arrivals_until(duration_s: float, rate: float, burstiness: float,
                   rng: np.random.Generator, start_s: float = 0.0) -> np.ndarray:
    """Arrival times in ``[start_s, start_s + duration_s)`` of a stationary gamma-renewal process.

    The first gap is drawn like the others (the window starts at a random point of the process
    only approximately; the bias is one gap at most).
    """
    _check(rate, burstiness)
    if not duration_s > 0:
        raise InputError(f"duration_s(={duration_s!r}) must be > 0")
    expected = rate * duration_s
    check_arrivals(expected, f"rate {rate:g} req/s x {duration_s:g} s")
    chunk = int(expected + 6 * math.sqrt(expected / burstiness) + 16)
    times = start_s + np.cumsum(gamma_gaps(chunk, rate, burstiness, rng))
    while times[-1] < start_s + duration_s:
        more = times[-1] + np.cumsum(gamma_gaps(chunk, rate, burstiness, rng))
        times = np.concatenate([times, more])
    return times[times < start_s + duration_s]
