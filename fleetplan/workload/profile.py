"""Arrivals that follow an hourly rate profile (24 hourly means): a non-homogeneous process.

Main entry: :func:`profile_arrivals`. The rate is piecewise constant by hour of day; arrivals are
a gamma renewal process (shape = burstiness, 1.0 = Poisson) run in *operational time*
``Lambda(t) = integral of rate``, then mapped back to clock time (time rescaling). So each hour
receives on average its own mean rate, and the burstiness holds within every hour.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fleetplan.errors import InputError
from fleetplan.workload.gamma import MIN_BURSTINESS, check_arrivals, gamma_gaps

HOUR_S = 3600.0


def _check_profile(rates: Sequence[float]) -> np.ndarray:
    r = np.asarray(rates, dtype=float)
    if r.shape != (24,):
        raise InputError(f"rate_profile_rps: need 24 hourly rates, got {r.size}")
    for h, v in enumerate(r):
        if not (math.isfinite(v) and v >= 0):
            raise InputError(f"rate_profile_rps[{h}]: {v!r} must be a finite rate >= 0")
    if not (r > 0).any():
        raise InputError("rate_profile_rps: at least one hourly rate must be > 0")
    return r


def rate_at(rates: Sequence[float], t_s: float, start_hour: int = 0) -> float:
    """The profile's rate (req/s) at simulated time ``t_s`` when t=0 is ``start_hour``:00."""
    r = _check_profile(rates)
    return float(r[int((start_hour * HOUR_S + t_s) // HOUR_S) % 24])


def cumulative_rate(rates: Sequence[float], duration_s: float,
                    start_hour: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Breakpoints ``(t, Lambda(t))`` of the integrated rate over ``[0, duration_s]``."""
    r = _check_profile(rates)
    # t=0 is a whole hour, so the rate changes at every multiple of an hour.
    t = np.append(np.arange(0.0, duration_s, HOUR_S), duration_s)
    hours = (start_hour + np.arange(t.size - 1)) % 24
    lam = np.concatenate([[0.0], np.cumsum(r[hours] * np.diff(t))])
    return t, lam


def expected_profile_arrivals(rates: Sequence[float], duration_s: float,
                              start_hour: int = 0) -> float:
    """Expected arrivals of the profile over ``[0, duration_s)`` (the integrated rate), computed
    hour by hour without building per-hour arrays longer than the run's hours."""
    r = _check_profile(rates)
    if not duration_s > 0:
        raise InputError(f"duration_s(={duration_s!r}) must be > 0")
    whole, rest = divmod(duration_s, HOUR_S)
    days, hours = divmod(int(whole), 24)
    total = days * float(r.sum()) * HOUR_S
    total += sum(float(r[(start_hour + h) % 24]) for h in range(hours)) * HOUR_S
    return total + float(r[(start_hour + int(whole)) % 24]) * rest


def profile_arrivals(rates: Sequence[float], duration_s: float, burstiness: float,
                     rng: np.random.Generator, start_hour: int = 0) -> np.ndarray:
    """Arrival times in ``[0, duration_s)`` following the hourly profile ``rates`` (req/s).

    ``start_hour`` is the hour of day at t=0. Hours with rate 0 receive no requests.
    """
    if not duration_s > 0:
        raise InputError(f"duration_s(={duration_s!r}) must be > 0")
    if not 0 <= start_hour <= 23:
        raise InputError(f"start_hour(={start_hour!r}) must be within 0..23")
    if not (burstiness >= MIN_BURSTINESS and math.isfinite(burstiness)):
        raise InputError(f"burstiness(={burstiness!r}) must be a finite number >= "
                         f"{MIN_BURSTINESS:g}")
    check_arrivals(expected_profile_arrivals(rates, duration_s, start_hour),
                   f"rate_profile_rps over {duration_s:g} s")
    t, lam = cumulative_rate(rates, duration_s, start_hour)
    total = float(lam[-1])
    if total <= 0:
        return np.empty(0)
    chunk = int(total + 6 * math.sqrt(total / burstiness) + 16)
    s = np.cumsum(gamma_gaps(chunk, 1.0, burstiness, rng))
    while s[-1] < total:
        s = np.concatenate([s, s[-1] + np.cumsum(gamma_gaps(chunk, 1.0, burstiness, rng))])
    s = s[s < total]
    # Lambda is non-decreasing and piecewise linear: invert segment by segment. Flat segments
    # (rate 0) hold no s almost surely; searchsorted puts any s on an increasing segment.
    idx = np.clip(np.searchsorted(lam, s, side="right") - 1, 0, len(t) - 2)
    slope = (lam[idx + 1] - lam[idx]) / (t[idx + 1] - t[idx])
    out = t[idx] + (s - lam[idx]) / slope
    return out[out < duration_s]
