"""Request traces in the Azure LLM inference format: read, replay, time-scale, fit.

The format is a CSV with ``TIMESTAMP,ContextTokens,GeneratedTokens`` (Microsoft's Azure public
dataset, 2023; timestamps ``YYYY-MM-DD HH:MM:SS.fffffff`` or plain seconds). Main entries:
:func:`read_trace` (checked, every bad line named), :func:`trace_requests` (arrivals and lengths
over a simulated window, as is or time-scaled to a target mean rate), :func:`fit_trace` (a class's
rate, gamma burstiness and lognormal length spreads estimated from a trace).
"""

from __future__ import annotations

import io
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import ValidationError

from fleetplan._load import read_bytes_bounded, show_value
from fleetplan.errors import InputError
from fleetplan.workload.arrivals import check_arrivals
from fleetplan.workload.lengths import LognormalLengths

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
TRACE_MAX_BYTES = 64 * 1024 * 1024
"""Largest trace file read (64 MiB, ~2.5 x 10^6 requests; each cell is read as text first, so
that a bad one can be named: ~0.5 GB at this size)."""
MAX_TRACE_TOKENS = 10_000_000
"""Largest token count of one request in a trace (beyond any served context window)."""
_ZONE = re.compile(r"(?:Z|[+-]\d\d(?::?\d\d)?)$", re.IGNORECASE)


@dataclass(frozen=True)
class Trace:
    """A checked trace: arrival offsets (s, first at 0) and token counts, in file order."""

    source: str
    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray

    def __len__(self) -> int:
        return int(self.arrival_s.size)

    @property
    def span_s(self) -> float:
        """Seconds from the first arrival to the last."""
        return float(self.arrival_s[-1])

    @property
    def rate_rps(self) -> float:
        """Mean arrival rate: gaps per second of span (``inf`` for a single instant)."""
        return (len(self) - 1) / self.span_s if self.span_s > 0 else math.inf


def _bad(path: Path, line: int, col: str, raw: Any, why: str) -> InputError:
    return InputError(f"{path}: line {line}: {col} {show_value(raw, 60)} {why}")


def _datetimes(p: Path, raw: pd.Series, stamps: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Seconds since the first stamp, and a mask of the unparsable ones. Stamps with a zone
    (``+02:00``, ``Z``) are compared in UTC; a trace mixing stamps with and without one is
    refused (their order is not defined), naming the first line that differs."""
    zoned = stamps.str.contains(_ZONE).to_numpy()
    if zoned.any() and not zoned.all():
        i = int(np.argmax(zoned != zoned[0]))
        has = "has a time zone" if zoned[i] else "has no time zone"
        raise _bad(p, i + 2, "TIMESTAMP", raw.iloc[i],
                   f"{has}, unlike line 2: give every timestamp a zone (or none)")
    try:
        dt = pd.to_datetime(stamps, format="ISO8601", errors="coerce", utc=bool(zoned.any()))
    except (ValueError, OverflowError, TypeError) as exc:
        raise InputError(f"{p}: TIMESTAMP: not readable as dates ({str(exc)[:120]})") from None
    bad = dt.isna().to_numpy()
    if bad.any():
        return np.zeros(len(stamps)), bad
    return (dt - dt.iloc[0]).dt.total_seconds().to_numpy(dtype=float), bad


def read_trace(path: str | os.PathLike[str]) -> Trace:
    """Read and check a trace file; any unparsable line is an error naming file, line and value.

    The file must be a regular file of at most :data:`TRACE_MAX_BYTES` (a FIFO or device is
    refused before it is opened); token counts are whole numbers within 1..
    :data:`MAX_TRACE_TOKENS`."""
    p = Path(path)
    try:
        data = read_bytes_bounded(p, what="trace file", max_bytes=TRACE_MAX_BYTES)
    except InputError as exc:
        if str(exc).endswith("no such trace file"):
            raise InputError(f"{p}: trace file not found") from None
        raise
    try:
        raw = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False,
                          skipinitialspace=True, encoding="utf-8")
    except pd.errors.EmptyDataError:  # a ValueError too: first
        raise InputError(f"{p}: empty trace") from None
    except (pd.errors.ParserError, UnicodeDecodeError, OSError, ValueError) as exc:
        raise InputError(f"{p}: not a readable CSV trace ({str(exc).splitlines()[0][:160]})") \
            from None
    missing = [c for c in COLUMNS if c not in raw.columns]
    if missing:
        raise InputError(f"{p}: missing column(s) {', '.join(missing)} (an Azure LLM trace has "
                         f"{','.join(COLUMNS)})")
    if raw.empty:
        raise InputError(f"{p}: the trace has no requests")
    stamps = raw["TIMESTAMP"].str.strip()
    seconds = pd.to_numeric(stamps, errors="coerce")
    if seconds.notna().all():
        t = seconds.to_numpy(dtype=float)
        bad_t = ~np.isfinite(t)
    else:
        t, bad_t = _datetimes(p, raw["TIMESTAMP"], stamps)
    if bad_t.any():
        i = int(np.argmax(bad_t))
        raise _bad(p, i + 2, "TIMESTAMP", raw["TIMESTAMP"].iloc[i], "is not a timestamp")
    tokens = {}
    for col in COLUMNS[1:]:
        v = pd.to_numeric(raw[col].str.strip(), errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(v) | (v < 1) | (v > MAX_TRACE_TOKENS) | (v != np.round(v))
        if bad.any():
            i = int(np.argmax(bad))
            raise _bad(p, i + 2, col, raw[col].iloc[i],
                       f"is not a whole number of tokens within 1..{MAX_TRACE_TOKENS}")
        tokens[col] = v.astype(np.int64)
    back = np.diff(t) < 0
    if back.any():
        i = int(np.argmax(back)) + 1
        raise _bad(p, i + 2, "TIMESTAMP", raw["TIMESTAMP"].iloc[i],
                   "is earlier than the line before (a trace must be in arrival order)")
    t = t - t[0]
    return Trace(str(p), t, tokens["ContextTokens"], tokens["GeneratedTokens"])


def trace_requests(trace: Trace, duration_s: float, *, scale_to_rps: float | None = None,
                   loop: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Arrival times in ``[0, duration_s)`` with their (input, output) token counts.

    As is, the trace's own timing is replayed from t=0. With ``scale_to_rps`` every offset is
    multiplied by ``trace.rate_rps / scale_to_rps`` (the burst pattern is kept, the mean rate
    becomes the target). A window longer than the (scaled) trace is an error unless ``loop``:
    then the trace repeats, one mean gap after its last request.
    """
    if not duration_s > 0:
        raise InputError(f"duration_s(={duration_s!r}) must be > 0")
    t = trace.arrival_s
    if scale_to_rps is not None:
        if not scale_to_rps > 0:
            raise InputError(f"scale_to_rps(={scale_to_rps!r}) must be > 0")
        if len(trace) < 2 or trace.span_s <= 0:
            raise InputError(f"{trace.source}: cannot time-scale a trace whose requests all "
                             "arrive at one instant")
        t = t * (trace.rate_rps / scale_to_rps)
    span = float(t[-1])
    period = span + (span / (len(t) - 1) if len(t) > 1 and span > 0 else 1.0)
    if span < duration_s and not loop and period < duration_s:
        raise InputError(
            f"{trace.source}: the trace covers {period:.1f} s"
            f"{' after scaling' if scale_to_rps else ''}, shorter than sim.duration_s "
            f"({duration_s:g}); shorten the run or set trace.loop: true")
    loops = max(1.0, duration_s / period) if loop else 1.0  # checked before ceil: may be inf
    check_arrivals(len(t) * loops, f"{trace.source}: {len(t)} requests x {loops:.4g} loop(s)")
    reps = math.ceil(loops)
    times = np.concatenate([t + k * period for k in range(reps)])
    ins = np.tile(trace.input_tokens, reps)
    outs = np.tile(trace.output_tokens, reps)
    keep = times < duration_s
    return times[keep], ins[keep], outs[keep]


@dataclass(frozen=True)
class TraceFit:
    """Arrival and length parameters of a class estimated from a trace."""

    source: str
    requests: int
    rate_rps: float
    burstiness: float
    input_tokens: LognormalLengths
    output_tokens: LognormalLengths

    def class_fields(self) -> dict[str, Any]:
        """The fitted figures as scenario class fields (``rate_rps``, ``burstiness`` ...)."""
        def dist(d: LognormalLengths) -> dict[str, Any]:
            # cv to 4 significant digits, not 4 decimals: the fit floors it at ~1e-6 (lengths
            # all equal), which 4 decimals would print as 0.0, a cv the schema refuses (> 0)
            return {"dist": "lognormal", "mean": round(d.mean, 3), "cv": float(f"{d.cv:.4g}"),
                    "min": d.min, "max": d.max}

        return {"rate_rps": round(self.rate_rps, 6), "burstiness": round(self.burstiness, 4),
                "input_tokens": dist(self.input_tokens),
                "output_tokens": dist(self.output_tokens)}


MIN_FIT_RATE, MAX_FIT_RATE = 1e-6, 1e5
"""Mean rates a fitted class may have (a scenario's ``rate_rps`` is at most 1e5)."""
MAX_FIT_CV = 10.0
"""Largest coefficient of variation a fitted length distribution gets (the schema's bound)."""


def _lognormal(x: np.ndarray, source: str, column: str) -> LognormalLengths:
    """Lognormal matching the sample's log-moments, reported as mean and cv, bounded by the data.

    A spread beyond :data:`MAX_FIT_CV` is capped *with* the mean recomputed for the capped
    spread, keeping the log-centre (the median): capping the cv alone left a mean of 10^17 for
    lengths of 1 and 10^7 tokens, which no draw within the data's range could reach."""
    logs = np.log(x.astype(float))
    mu, sigma = float(np.mean(logs)), float(np.std(logs))
    sigma = min(max(sigma, 1e-6), math.sqrt(math.log1p(MAX_FIT_CV**2)))
    mean = math.exp(mu + sigma**2 / 2)
    cv = min(math.sqrt(math.expm1(sigma**2)), MAX_FIT_CV)
    try:
        return LognormalLengths(mean=mean, cv=cv, min=int(x.min()), max=int(x.max()))
    except ValidationError as exc:
        why = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise InputError(f"{source}: {column}: no lognormal fits these lengths ({why})") from None


def fit_trace(trace: Trace) -> TraceFit:
    """Fit a class to a trace: mean rate, gamma shape of the gaps, lognormal lengths.

    Burstiness is the method-of-moments gamma shape ``mean(gap)^2 / var(gap)`` (1 = Poisson,
    < 1 burstier). Lengths are lognormal by the moments of their logarithms (robust to the long
    tails of real prompts), truncated to the observed range. Needs at least 3 requests.
    """
    if len(trace) < 3 or trace.span_s <= 0:
        raise InputError(f"{trace.source}: need at least 3 requests over a positive time span "
                         "to fit a class")
    if not MIN_FIT_RATE <= trace.rate_rps <= MAX_FIT_RATE:
        raise InputError(f"{trace.source}: its mean rate {trace.rate_rps:.4g} req/s "
                         f"({len(trace)} requests over {trace.span_s:.4g} s) is outside the "
                         f"{MIN_FIT_RATE:g}..{MAX_FIT_RATE:g} req/s a class may have")
    gaps = np.diff(trace.arrival_s)
    var = float(np.var(gaps))
    shape = float(np.mean(gaps)) ** 2 / var if var > 0 else 100.0
    return TraceFit(
        source=trace.source, requests=len(trace), rate_rps=trace.rate_rps,
        burstiness=min(max(shape, 1e-3), 100.0),
        input_tokens=_lognormal(trace.input_tokens, trace.source, "ContextTokens"),
        output_tokens=_lognormal(trace.output_tokens, trace.source, "GeneratedTokens"),
    )
