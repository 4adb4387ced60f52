"""The host's share of a first token's latency: streamed outputs reach the client in turn.

A vLLM server does not hand its tokens to the client the instant a step ends. Each step's
outputs (one per running request) go from the engine process to the API server, which
detokenizes them and writes one streamed chunk per request; the client (in the study's runs,
``benchmark_serving.py`` on the same host) reads and timestamps them one after another. In
vLLM 0.8.5 the scheduler builds a step's outputs by walking its running list
(``vllm/v1/core/sched/scheduler.py``, ``update_from_output``), which is in admission order with
the requests admitted in this step last, and the API server's output handler processes them in
that order (``vllm/v1/engine/output_processor.py``). So a request's first token waits for every
output listed before it: about ``c_deliver x (decoders + its place among the step's new first
tokens)``, ``c_deliver`` the host's time per streamed output.

The model (``ReplicaParams.c_deliver``): request ``i`` whose first token ends a step at
``F_i`` is delivered ``c_deliver x (n_i + k_i)`` later, ``n_i`` the requests decoding in
that step (first token before ``F_i``, last token at or after it) and ``k_i`` its 1-based place
among the requests whose first token came at the same instant (in request order, the
admission order of a FCFS engine). Its last token, at ``E_i``, is one of that step's ``m_i``
decoding outputs, listed at a place that depends on which earlier-admitted requests still run;
it is taken at their mean place, ``c_deliver x (m_i + 1) / 2`` (a named simplification). So TTFT
and E2E grow by the lags of the first and last token, TPOT changes by the difference of the
two over the request's tokens (a request moves up the list as older ones finish, down as it
shares steps with more decoders), and the gaps between tokens are the engine's (a token's place
changes little from one step to the next).
The engine itself does not wait for the host (vLLM sends outputs from a separate thread), so
step times and admissions are unchanged (a burst's duration grows by its last reply's lag);
the lag is added to the engine's per-request times by every consumer that reports client-side
latencies: burst replays
(:mod:`fleetplan.replica.protocol`), steady state (:mod:`fleetplan.replica.steady`) and the
fleet simulator (:mod:`fleetplan.fleet.sim`, per replica).

**A delay of the whole stream** (``ReplicaParams.first_token_delay_s``, ``..._sigma``; issue
42). The tensor-parallel RTX 4090 servers of the study deliver first tokens hundreds of
milliseconds to seconds later than any step schedule puts them, and the step costs fitted to
what their engines do cannot explain it (docs/replica-model.md, "The tensor-parallel RTX 4090
first-token delays"). Such a server's calibration fits that delay as its own term after the
engine (:mod:`fleetplan.replica.stream_delay`): request ``i`` of a replica's stream gets
``median x exp(sigma x z_i)``, ``z_i`` the standard normal quantile of
``frac((i + 1) x 0.618...)`` (golden-ratio points: an even spread over any number of requests,
no random draw, so a replay is a function of its inputs), added to its first and to its last
token (its later tokens come behind the first: TPOT and the gaps between tokens stay the
engine's). The engine does not wait for it either.

Main entries: :func:`delivery_lags`, :func:`client_lags` (a parameter set's lags: the host's,
plus the stream delay), :func:`stream_delays`. The value of ``c_deliver`` is one host figure
shared by every configuration (:data:`fleetplan.replica.priors.C_DELIVER_S`, how it was chosen is
there), never fitted per configuration: the runs of one configuration cannot separate it from
the engine's own per-sequence cost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy.special import ndtri

from fleetplan.errors import InputError

if TYPE_CHECKING:
    from fleetplan.replica.params_record import ReplicaParams

GOLDEN = 0.6180339887498949  # (sqrt(5) - 1) / 2: the stream delays' low-discrepancy points


def stream_delays(n: int, median_s: float, sigma: float) -> np.ndarray:
    """The stream delays (s) of ``n`` requests in order (module docstring): ``median_s x
    exp(sigma x z_i)``, ``z_i`` the normal quantiles of golden-ratio points; all ``median_s``
    at ``sigma`` 0, zeros at ``median_s`` 0."""
    if not (np.isfinite(median_s) and median_s >= 0 and np.isfinite(sigma) and sigma >= 0):
        raise InputError(f"stream delay median(={median_s!r}) and sigma(={sigma!r}) must be "
                         "finite numbers >= 0")
    if median_s == 0 or n == 0:
        return np.zeros(n)
    if sigma == 0:
        return np.full(n, float(median_s))
    u = np.mod((np.arange(n) + 1.0) * GOLDEN, 1.0)
    return float(median_s) * np.exp(sigma * ndtri(u))


def _replica_groups(n: int, replica: np.ndarray | None) -> list[np.ndarray]:
    """The indices of ``n`` requests by the replica that served each (``replica``: one entry per
    request; None: one replica), each group in request order."""
    if replica is None:
        return [np.arange(n)]
    rep = np.asarray(replica)
    if rep.shape != (n,):
        raise InputError("delivery_lags: replica must have one entry per request")
    order = np.argsort(rep, kind="stable")
    return np.split(order, np.flatnonzero(np.diff(rep[order])) + 1)


def client_lags(first_s: np.ndarray, finish_s: np.ndarray, params: ReplicaParams,
                replica: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`delivery_lags` of ``params``' host time, plus its stream delay
    (``first_token_delay_s``, ``first_token_delay_sigma``) on the first and the last token of
    every request that has a first token; ``replica`` as there (each replica's requests get
    their own sequence of delays, in request order)."""
    first = np.asarray(first_s, dtype=float)
    lag_first, lag_last = delivery_lags(first, finish_s, params.c_deliver, replica)
    med, sig = params.first_token_delay_s, params.first_token_delay_sigma
    if med == 0 or first.size == 0:
        return lag_first, lag_last
    for idx in _replica_groups(first.size, replica):
        d = stream_delays(idx.size, med, sig)
        got = ~np.isnan(first[idx])
        lag_first[idx[got]] += d[got]
        lag_last[idx[got]] += d[got]
    return lag_first, lag_last


def delivery_lags(first_s: np.ndarray, finish_s: np.ndarray, c_deliver: float,
                  replica: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per request, the seconds by which its first and its last token reach the client after
    the engine produced them (module docstring). ``first_s`` / ``finish_s``: the engine's
    first-token and last-token times (NaN: not reached; a request without a last token counts
    as still decoding, one without a first token gets no lag); ``replica``: which replica served
    each request (the outputs of different replicas do not wait for each other), default one.
    The last token's lag never puts it before the first token's delivery."""
    first = np.asarray(first_s, dtype=float)
    fin = np.asarray(finish_s, dtype=float)
    if first.shape != fin.shape or first.ndim != 1:
        raise InputError("delivery_lags: first_s and finish_s must be 1-D and of one length")
    if not (np.isfinite(c_deliver) and c_deliver >= 0):
        raise InputError(f"c_deliver(={c_deliver!r}) must be a finite number >= 0")
    lag_first, lag_last = np.zeros(first.size), np.zeros(first.size)
    if c_deliver == 0 or first.size == 0:
        return lag_first, lag_last
    for idx in _replica_groups(first.size, replica):
        got = ~np.isnan(first[idx])
        if not got.any():
            continue
        ids = idx[got]
        f = first[ids]
        e = np.where(np.isnan(fin[ids]), np.inf, fin[ids])
        order = np.argsort(f, kind="stable")  # ties (one step's first tokens) in request order
        fs, es = f[order], np.sort(e)
        started_before = np.searchsorted(fs, fs, side="left")  # first token before F_i
        decoders = started_before - np.searchsorted(es, fs, side="left")  # ... still running
        place = np.arange(fs.size) - started_before + 1  # among the step's first tokens
        lf = np.empty(fs.size)
        lf[order] = c_deliver * (decoders + place)
        # the step that ends at E_i: requests started before it and not finished before it
        done = np.isfinite(e)
        ed = e[done]
        m = np.searchsorted(fs, ed, side="left") - np.searchsorted(es, ed, side="left")
        ll = np.zeros(fs.size)  # no last token yet: no lag
        ll[done] = np.maximum(c_deliver * (m + 1) / 2.0, f[done] + lf[done] - ed)  # in order
        one = e <= f  # one output token: its first token is its last
        ll[one] = lf[one]
        lag_first[ids], lag_last[ids] = lf, ll
    return lag_first, lag_last
