"""The replica engine of a steady-state run, compiled: the same schedule as the SimPy engine.

A steady-state run (:func:`fleetplan.replica.steady.steady_state`) knows all its arrivals before
it starts and has one replica, so it needs none of SimPy's generality: this module runs
:class:`fleetplan.replica.engine.ReplicaEngine`'s steps and
:class:`fleetplan.replica.scheduler.Scheduler`'s rules (FCFS queue, running first, admissions
within the token budget, running cap and KV blocks, preemption of the most recently admitted
request, prefix-cache hits, jumps over decode-only steps) as one loop over arrays, compiled with
Numba. Every quantity is computed with the same floating-point operations in the same order as
the Python engine, the clock included (a SimPy timeout fires at ``now + max(0, t - now)``), and
the source's overload checks happen at the same arrivals (after a check that finds ``q``
queued, the next ``limit - q`` arrivals are not checked), so a run gives the Python engine's
times request by request, bit for bit (``tests/replica/test_steady_kernel.py``: preemptions,
prefix hits, overload and early stops included). The Python engine stays the model's reference
and serves the fleet simulator, replays and calibration, where replicas share a clock.

Main entry: :func:`run_steady`; it returns per-request times and the run's counters, and
:func:`fleetplan.replica.steady.steady_state` turns them into its result. :func:`prepare`
compiles (or loads) the loop ahead, as a named progress step: the first run in a process waits
for it, ~10 s the first time on a machine.
The loop itself is :func:`fleetplan.replica.steady_loop.steady_loop`; its codes and helpers are
in :mod:`fleetplan.replica.steady_arrays`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from fleetplan._progress import Progress, step, warn
from fleetplan.errors import ModelError
from fleetplan.replica.engine import check_limits, refusal
from fleetplan.replica.power import _SLOPE, ANCHOR_LOW, F_LOW
from fleetplan.replica.steady_arrays import (
    ERR_BAD_REQUEST,
    ERR_NOT_SCHEDULED,
    ERR_STALLED,
    FIGURE_CODES,
    STOP_ABOVE,
    STOP_DONE,
    STOP_OVERLOAD,
)
from fleetplan.replica.steady_loop import steady_loop

__all__ = ["PREPARE_STEP", "STOP_ABOVE", "STOP_DONE", "STOP_OVERLOAD", "prepare", "run_steady"]

#: The progress step of :func:`prepare`.
PREPARE_STEP = "preparing the compiled steady-state engine (~10 s the first time on a machine)"
#: The files whose code Numba compiles into the loop. Numba's cache checks only the decorated
#: function's own file, so the cache folder is keyed on all of them (:func:`_source_tag`): an
#: edit of a helper must not load machine code compiled from the old one.
LOOP_SOURCES = ("steady_loop.py", "steady_arrays.py", "step_math.py", "schedule_policy.py")


def jit_cache_dir() -> Path:
    """The folder of the compiled engine's machine code: ``jit/`` of the cache folder
    (``$FLEETPLAN_CACHE_DIR``, else ``~/.cache/fleetplan``; read at call time)."""
    from fleetplan._cache_dir import user_cache_dir

    return user_cache_dir() / "jit"


@functools.cache
def _source_tag(package: Path = Path(__file__).parent) -> str:
    """The first 16 hex digits of a SHA-256 of :data:`LOOP_SOURCES` (in ``package``): the
    cache subfolder."""
    h = hashlib.sha256()
    for name in LOOP_SOURCES:
        h.update((package / name).read_bytes())
    return h.hexdigest()[:16]


def clear_jit_cache() -> int:
    """Remove the compiled engine's cached machine code (a later process compiles it again,
    ~10 s); returns how many files were removed."""
    folder = jit_cache_dir()
    n = 0
    if folder.is_dir():
        for f in sorted(folder.rglob("*"), reverse=True):  # files before their folders
            try:
                if f.is_dir() and not f.is_symlink():
                    f.rmdir()
                else:
                    f.unlink()
                    n += 1
            except OSError:
                pass  # a file another process holds, or a folder not empty: left alone
        with contextlib.suppress(OSError):
            folder.rmdir()
    return n


def _compile(fn: Any, cache: bool = True) -> Any:
    """``fn`` compiled by Numba, or plain Python where ``FLEETPLAN_NO_JIT=1`` (debugging: the
    same results, ~100x slower). The machine code is cached under :func:`jit_cache_dir`, in a
    folder named by :func:`_source_tag` (not a data context's folder, so that worker processes
    find it; ``FLEETPLAN_JIT_CACHE=0`` or ``cache=False``: compile in memory only): a process
    after the first loads it (~1 s with Numba's import) instead of compiling it (~10 s)."""
    if os.environ.get("FLEETPLAN_NO_JIT") == "1":
        return fn
    from numba import njit
    from numba.core import config

    if not cache or os.environ.get("FLEETPLAN_JIT_CACHE") == "0":
        return njit(cache=False, nogil=True)(fn)
    folder = jit_cache_dir() / _source_tag()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK):
            raise OSError
    except OSError:
        # an unwritable cache folder: compile in memory (Numba would otherwise fall back to
        # the package's own __pycache__, which is not ours to write)
        return njit(cache=False, nogil=True)(fn)
    # Numba reads its cache folder when a function is decorated: set it for this one alone
    was = config.CACHE_DIR  # type: ignore[attr-defined]
    config.CACHE_DIR = str(folder)  # type: ignore[attr-defined]
    try:
        return njit(cache=True, nogil=True)(fn)
    finally:
        config.CACHE_DIR = was  # type: ignore[attr-defined]


_LOOP: list[Any] = []  # compiled on the first run, not at import


def prepare(params: Any, progress: Progress | None = None) -> None:
    """Make the compiled loop ready in this process (a one-request run of ``params``' replica),
    reported to ``progress`` as :data:`PREPARE_STEP`; nothing to do once it is ready, or where
    ``FLEETPLAN_NO_JIT=1``. Worker processes forked afterwards inherit it; others load it from
    the cache folder (:func:`_compile`)."""
    if _LOOP or os.environ.get("FLEETPLAN_NO_JIT") == "1":
        return
    one = np.ones(1, dtype=np.int64)
    with step(progress, PREPARE_STEP):
        run_steady(np.zeros(1), one, one, np.zeros(1, dtype=np.int64), np.ones(1, dtype=bool),
                   params=params, limit=64, watch=[])


def _bad_requests(p: Any, inp: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Which requests :class:`fleetplan.replica.engine.ReplicaEngine` refuses when they are
    submitted (:func:`fleetplan.replica.engine.refusal` says why), after its check of the
    parameters (:func:`fleetplan.replica.engine.check_limits`)."""
    check_limits(p)
    total = inp + out
    return ((inp < 1) | (out < 1) | (total > p.max_model_len)
            | (-(-total // p.block_size) + p.seq_state_blocks > p.kv_blocks))


def run_steady(arr_t: np.ndarray, inp: np.ndarray, out: np.ndarray, hit: np.ndarray,
               measured: np.ndarray, *, params: Any, limit: int,
               watch: list[tuple[str, float, int]]) -> tuple[Any, ...]:
    """One steady-state run of ``params``' replica over the given arrivals (seconds), prompt,
    reply and cached-prompt tokens; ``measured`` marks the requests whose completion ends the
    run; ``limit`` is the overload limit on queued requests; ``watch`` the ``(figure, limit,
    count)`` early stops. Returns ``(first token, finish, first admission)`` times per request
    (NaN where not reached), the stop (``STOP_*``), the watch entry stopped on (-1: none), the
    clock at the end and the engine's busy and activity seconds."""
    p = params
    inp = np.ascontiguousarray(inp, dtype=np.int64)
    out = np.ascontiguousarray(out, dtype=np.int64)
    bad = _bad_requests(p, inp, out)  # refused when the run submits them, as the engine does
    args = (
        np.ascontiguousarray(arr_t, dtype=np.float64), inp, out,
        np.ascontiguousarray(hit, dtype=np.int64), np.ascontiguousarray(measured, dtype=np.bool_),
        bad,
        float(p.overhead_s), int(limit), float(p.c_step), float(p.c_prefill_tok),
        float(p.c_seq), float(p.c_kv_tok), int(p.block_size), int(p.kv_blocks),
        int(p.seq_state_blocks),
        int(p.max_num_seqs), int(p.max_num_batched_tokens), float(F_LOW), float(_SLOPE),
        float(ANCHOR_LOW[0]),
        np.array([FIGURE_CODES[name] for name, _, _ in watch], dtype=np.int64),
        np.array([lim for _, lim, _ in watch], dtype=np.float64),
        np.array([need for _, _, need in watch], dtype=np.int64),
        float(p.c_experts), float(p.expert_share))
    if _LOOP:
        res = _LOOP[0](*args)
    else:
        loop, res = first_call(steady_loop, args)
        _LOOP.append(loop)
    status = int(res[3])
    if status == ERR_NOT_SCHEDULED:
        raise ModelError(f"{p.config}: a decoding sequence was not scheduled")
    if status == ERR_BAD_REQUEST:
        i = int(res[4])
        raise refusal(p, i, int(inp[i]), int(out[i]))
    if status == ERR_STALLED:
        raise ModelError(f"{p.config}: the run stalled with measured requests unfinished")
    return res


def _from_jit_cache(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while Numba read (or wrote) its cache files."""
    return any(f.filename.replace(os.sep, "/").endswith("numba/core/caching.py")
               for f in traceback.extract_tb(exc.__traceback__))


def first_call(fn: Any, args: tuple[Any, ...]) -> tuple[Any, Any]:
    """``fn`` compiled (:func:`_compile`) and its result on ``args``. The first call is where
    Numba loads the cached machine code: a damaged cache (a truncated, empty or garbage file
    under :func:`jit_cache_dir`) means compiling again, with one warning, never a failed run.
    The cache is cleared and the new code cached again; where even that fails, the code is
    compiled in memory."""
    compiled = _compile(fn)
    try:
        return compiled, compiled(*args)
    except Exception as exc:  # noqa: BLE001 - re-raised unless Numba's cache raised it
        if not _from_jit_cache(exc):
            raise
        why = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
    folder = jit_cache_dir()
    clear_jit_cache()
    warn(None, f"the compiled steady-state engine's cache in {folder} could not be read "
               f"({why}); compiling it again (~10 s)")
    compiled = _compile(fn)
    try:
        return compiled, compiled(*args)
    except Exception as exc:  # noqa: BLE001 - as above
        if not _from_jit_cache(exc):
            raise
    compiled = _compile(fn, cache=False)
    return compiled, compiled(*args)
