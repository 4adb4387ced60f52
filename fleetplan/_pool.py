"""Process pools whose workers never outlive the process that started them.

Every process pool fleetplan starts (capacity searches, verification runs and frontier points
through :class:`fleetplan.optimize.executors.LocalExecutor`; the configuration fits of
``calibrate --jobs`` and ``validate --cv --jobs``) is made here, by :func:`pool_imap`.

Why: a ``ProcessPoolExecutor``'s workers wait for work from their parent; if the parent dies
without shutting the pool down (``kill -9``, the OOM killer, a CI job's ``timeout``), they are
re-parented to init and wait, holding their memory, for as long as the machine runs. Here each
worker runs a watchdog thread that ends the worker within milliseconds when

- its parent dies, however it dies: forked workers (Linux) each hold the read end of a pipe
  whose only write end is the parent's, so the kernel's closing of that end at the parent's
  death is an EOF for every worker; workers started otherwise (spawn on macOS, forkserver)
  check every :data:`POLL_S` seconds whether they were re-parented or the process that made
  the pool is gone (a forkserver stays while its children live: it ends after them);
- or it receives SIGTERM (the parent ending the pool, or a user).

The watchdog first removes the temporary files the worker is writing
(:func:`fleetplan._io.abandon_temp_files`: a cache entry or an atomic write cut short leaves
nothing behind), kills the worker's own children (a CBC solver process) and removes the
worker's own temporary folder (``TMPDIR`` in the worker: PuLP's model and solution files), then
exits (``os._exit``). Workers ignore SIGINT: a terminal's Ctrl-C reaches the whole process
group, and the parent, which gets ``KeyboardInterrupt``, ends its pool itself (SIGTERM to every
worker, SIGKILL to any still there after :data:`STOP_WAIT_S`) without waiting for the queued
jobs.

Start method: ``fork`` on Linux (the compiled steady-state loop that ``solve`` prepares before
its searches is inherited; and there is no forkserver process that could outlive the parent),
the platform's default elsewhere. On Windows no watchdog is armed.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

POLL_S = 0.25  # how often a spawned worker (no parent pipe) checks its parent
STOP_WAIT_S = 5.0  # how long an interrupted pool's workers get to end before SIGKILL
WORKER_EXIT = 143  # a worker's exit status when its watchdog ends it (as if by SIGTERM)
_POSIX = os.name == "posix"

# Write ends of the parent pipes of this process's live pools. A forked child closes its copies
# at once (_close_inherited): only the parent may hold them, or its death would be no EOF.
_WRITE_ENDS: set[int] = set()


def _close_inherited() -> None:
    for fd in list(_WRITE_ENDS):
        with contextlib.suppress(OSError):
            os.close(fd)
    _WRITE_ENDS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_inherited)


def _context() -> Any:
    if sys.platform.startswith("linux"):
        return mp.get_context("fork")
    return mp.get_context()


# --- in the worker ----------------------------------------------------------------------------


def _worker_init(parent_fd: int | None, parent_pid: int) -> None:
    """The pool's initializer: arm the watchdog (module docstring)."""
    if not _POSIX:
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends its workers (Ctrl-C)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    # SIGTERM: Python's C-level handler writes the signal number to wake_w at once, whatever the
    # main thread is doing (a compiled loop, a blocking read); the watchdog reads it. The wakeup
    # fd is set before the handler, so no SIGTERM falls between them unseen.
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, _on_sigterm)
    _private_temp_folder()
    threading.Thread(target=_watch, args=(parent_fd, wake_r, parent_pid, os.getppid()),
                     daemon=True, name="fleetplan-pool-watchdog").start()


_TEMP_FOLDER: list[str] = []  # this worker's own temporary folder


def _private_temp_folder() -> None:
    """Point this worker's temporary files (``tempfile``; ``TMPDIR`` / ``TMP``, which PuLP reads
    for a solver's model and solution files and its CBC child inherits) into a folder of its
    own: removed with all in it when the watchdog ends the worker, removed if empty when the
    worker ends normally (a file a job made and left there stays, as it would in the system's
    folder)."""
    import tempfile
    from multiprocessing.util import Finalize

    try:
        folder = tempfile.mkdtemp(prefix=f"fleetplan-worker-{os.getpid()}-")
    except OSError:  # no writable temporary folder: files go where they would have gone
        return
    _TEMP_FOLDER.append(folder)
    os.environ["TMPDIR"] = os.environ["TMP"] = folder
    tempfile.tempdir = folder
    Finalize(None, _remove_if_empty, args=(folder,), exitpriority=0)


def _remove_if_empty(folder: str) -> None:
    with contextlib.suppress(OSError):
        os.rmdir(folder)


def _on_sigterm(signum: int, frame: Any) -> None:
    """Nothing in the main thread: the watchdog, woken by the same signal, ends the worker."""


def _watch(parent_fd: int | None, wake_r: int, parent_pid: int, ppid: int) -> None:
    import select

    fds = [wake_r] if parent_fd is None else [parent_fd, wake_r]
    timeout = POLL_S if parent_fd is None else None
    while True:
        ready, _, _ = select.select(fds, [], [], timeout)
        if parent_fd is not None and parent_fd in ready:
            break  # EOF: the parent is gone (or closed the pipe to end the pool)
        if wake_r in ready and signal.SIGTERM in os.read(wake_r, 512):
            break
        # re-parented, or (a forkserver's child: the forkserver stays while its children
        # live) the process that made the pool is gone
        if parent_fd is None and (os.getppid() != ppid or not _alive(parent_pid)):
            break
    _end_worker()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists (POSIX)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: it exists
        return True
    return True


def _end_worker() -> None:
    from fleetplan._io import abandon_temp_files

    abandon_temp_files()
    _kill_children()
    if _TEMP_FOLDER:
        _remove_folder(_TEMP_FOLDER[0])
    os._exit(WORKER_EXIT)


def _remove_folder(folder: str) -> None:
    """Remove ``folder`` and all in it while this worker's main thread may still be running: a
    solve whose solver child was just killed wakes up and writes or deletes its files there,
    and a file made between ``rmtree``'s listing and its last ``rmdir`` left the folder behind
    (a CI run of ``test_kill_9_of_a_frontier_sweep_mid_points_leaves_no_worker``, 7 Dec 2026).
    The folder is renamed first, so nothing more is made in it by its name; what is already
    in it is removed, retried while a removal races the main thread."""
    import shutil

    doomed = f"{folder}.removing"
    try:
        os.rename(folder, doomed)
    except OSError:  # gone already, or not ours to rename: remove it where it is
        doomed = folder
    for _ in range(20):
        shutil.rmtree(doomed, ignore_errors=True)
        if not os.path.lexists(doomed):
            return
        time.sleep(0.01)


def _kill_children() -> None:
    """SIGKILL this process's own children (an external solver run by a frontier point), found
    in /proc (Linux); elsewhere nothing."""
    me = str(os.getpid())
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{me}/task"):
            with contextlib.suppress(OSError, ValueError), \
                    open(f"/proc/{me}/task/{tid}/children", encoding="ascii") as fh:
                for pid in fh.read().split():
                    with contextlib.suppress(OSError):
                        os.kill(int(pid), signal.SIGKILL)


# --- in the parent ----------------------------------------------------------------------------


class WorkerPool(ProcessPoolExecutor):
    """A ``ProcessPoolExecutor`` of watched workers (module docstring). Leaving its ``with``
    block normally waits for the jobs, as ``ProcessPoolExecutor`` does; leaving it by an
    exception (Ctrl-C included) or closing the generator that uses it ends the workers at once
    (:meth:`stop`)."""

    def __init__(self, workers: int) -> None:
        ctx = _context()
        parent_fd: int | None = None
        self._write_fd: int | None = None
        if _POSIX and ctx.get_start_method() == "fork":
            parent_fd, self._write_fd = os.pipe()
            _WRITE_ENDS.add(self._write_fd)
        self._read_fd = parent_fd
        try:
            super().__init__(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                             initargs=(parent_fd, os.getpid()))
        except BaseException:
            self._close_pipe()
            raise

    def stop(self) -> None:
        """End the workers now: queued jobs cancelled, running ones abandoned (each worker
        removes its temporary files and ends), SIGKILL for any still there after
        :data:`STOP_WAIT_S`; then the pool's threads are joined."""
        procs = list((getattr(self, "_processes", None) or {}).values())
        # shutdown(wait=False) forgets the manager thread; it is joined below, or the
        # interpreter's exit hook could wake it through a pipe it is closing (EBADF).
        manager = getattr(self, "_executor_manager_thread", None)
        with contextlib.suppress(Exception):
            self.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            with contextlib.suppress(Exception):
                p.terminate()
        self._close_pipe()
        sentinels = {p.sentinel: p for p in procs}
        deadline = time.monotonic() + STOP_WAIT_S
        from multiprocessing.connection import wait

        while sentinels and time.monotonic() < deadline:
            for s in wait(list(sentinels), timeout=max(0.0, deadline - time.monotonic())):
                sentinels.pop(s, None)  # type: ignore[call-overload]
        for p in sentinels.values():
            with contextlib.suppress(Exception):
                p.kill()
        with contextlib.suppress(Exception):
            self.shutdown(wait=True)
        if manager is not None:
            manager.join(timeout=STOP_WAIT_S)

    def _close_pipe(self) -> None:
        for fd in (self._write_fd, self._read_fd):
            if fd is not None:
                _WRITE_ENDS.discard(fd)
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._write_fd = self._read_fd = None

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.shutdown(wait=True)
        else:
            self.stop()
        self._close_pipe()


def pool_imap(fn: Callable[[T], R], items: Sequence[T], workers: int) -> Iterator[R]:
    """``fn`` over ``items`` in a :class:`WorkerPool` of ``workers`` processes: results in input
    order, each as soon as it and those before it are done. An exception in ``fn`` is raised
    here, and ends the pool like Ctrl-C does (the remaining jobs are not waited for)."""
    items = list(items)
    with WorkerPool(workers) as pool:
        with _ctrl_c_after():  # the first submit forks the workers
            futures: list[Future[R]] = [pool.submit(fn, x) for x in items]
        for fut in futures:
            yield fut.result()


@contextlib.contextmanager
def _ctrl_c_after() -> Iterator[None]:
    """Hold a Ctrl-C that comes while the workers are forked, and raise it after. Python runs
    its fork hooks (``logging``'s among them) in the parent after each fork; a
    ``KeyboardInterrupt`` raised in one is printed as "Exception ignored" and lost, and the
    command would go on as if no Ctrl-C had come. Only where Python's own handler is set and in
    the main thread (the only one that may set a handler)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    held: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if held:
            raise KeyboardInterrupt
