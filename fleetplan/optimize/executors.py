"""Executors for independent jobs (capacity searches, verification runs, frontier points).

An executor maps a picklable top-level function over a list of picklable items and returns the
results in input order, so a parallel run gives the same bytes as a serial one (``serial`` and
``local`` also have ``imap``, the same results one by one, for progress reporting). Three kinds, in
one registry: ``serial`` (in process), ``local`` (a process pool on this machine, the default)
and ``dask`` (a Dask distributed cluster; ``pip install 'fleetplan[dask]'``).

Main entry: :func:`get_executor` (``None`` -> local processes; ``"serial"``; ``"local"`` or
``"local:N"``; a scheduler address such as ``tcp://host:8786`` -> Dask; a
``distributed.Client`` -> Dask on that client; any object with ``map`` passes through).

A job reads nothing of the process that sent it: what it needs travels with it (a capacity job
carries its replica parameters and its cache folder; a verification run or a frontier point, its
scenario, whose data context names the catalog, store and calibration), so a Dask worker or a
process started afresh computes what a forked one does.

The local pool is :func:`fleetplan._pool.pool_imap`, the one maker of process pools (also of
``calibrate --jobs``): its workers end on their own when the process that started them dies,
however it dies, and leave no temporary file; Ctrl-C or an error ends them at once. A Dask run
that fails or is interrupted cancels its futures, so a user's cluster is left as it was found.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from fleetplan._pool import pool_imap
from fleetplan.errors import InputError, UnknownNameError

T = TypeVar("T")
R = TypeVar("R")


@runtime_checkable
class Executor(Protocol):
    """Anything that maps a function over items, results in input order."""

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]: ...


class SerialExecutor:
    """Runs every job in this process, one after another."""

    name = "serial"

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        return [fn(x) for x in items]

    def imap(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
        """Results one by one, in input order (lets a progress bar advance)."""
        return (fn(x) for x in items)


class LocalExecutor:
    """A pool of local worker processes (``workers`` defaults to the CPU count), made by
    :func:`fleetplan._pool.pool_imap` (workers that never outlive this process)."""

    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        if workers is not None and workers < 1:
            raise InputError(f"workers(={workers}) must be >= 1")
        self.workers = workers or os.cpu_count() or 1

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        return list(self.imap(fn, items))

    def imap(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
        """Results in input order as they are done (lets a progress bar advance)."""
        items = list(items)
        n = min(self.workers, len(items))
        if n <= 1:
            yield from (fn(x) for x in items)
            return
        yield from pool_imap(fn, items, n)


class DaskExecutor:
    """Jobs on a Dask distributed cluster given by scheduler address or ``Client``."""

    name = "dask"

    def __init__(self, scheduler: Any) -> None:
        try:
            import distributed
        except ImportError:
            raise InputError("--scheduler needs Dask distributed: pip install "
                             "'fleetplan[dask]'") from None
        self._own = not isinstance(scheduler, distributed.Client)
        self.scheduler = scheduler

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        import distributed

        items = list(items)
        if not items:
            return []
        if not self._own:
            return _gather(self.scheduler, fn, items)
        try:
            client = distributed.Client(self.scheduler, timeout="20s")
        except (OSError, TimeoutError) as exc:
            raise InputError(f"cannot reach Dask scheduler {self.scheduler}: {exc}") from None
        try:
            return _gather(client, fn, items)
        finally:
            client.close()


def _gather(client: Any, fn: Callable[[T], R], items: list[T]) -> list[R]:
    """``fn`` over ``items`` on ``client``'s cluster, results in input order. On an error or
    Ctrl-C the jobs still queued or running are cancelled: the cluster (perhaps the user's own,
    serving others) is left as it was found, not busy with work nobody will read."""
    futures = client.map(fn, items, pure=False)
    try:
        return list(client.gather(futures))
    except BaseException:
        import contextlib

        with contextlib.suppress(Exception):
            client.cancel(futures)
        raise


_KINDS: dict[str, Callable[[str], Executor]] = {}


def register_executor(kind: str, factory: Callable[[str], Executor]) -> None:
    """Register an executor kind (``factory(argument)``); duplicates are refused."""
    if kind in _KINDS:
        raise ValueError(f"executor kind {kind!r} is already registered")
    _KINDS[kind] = factory


def _local(arg: str) -> Executor:
    if not arg:
        return LocalExecutor()
    try:
        return LocalExecutor(int(arg))
    except ValueError:
        raise InputError(f"executor local:{arg}: the worker count must be a whole number") from None


register_executor("serial", lambda arg: SerialExecutor())
register_executor("local", _local)
register_executor("dask", lambda arg: DaskExecutor(arg))


def get_executor(spec: Any = None) -> Executor:
    """The executor for ``spec`` (see the module docstring)."""
    if spec is None:
        return LocalExecutor()
    if isinstance(spec, str):
        if "://" in spec:
            return DaskExecutor(spec)
        kind, _, arg = spec.partition(":")
        if kind not in _KINDS:
            raise UnknownNameError("executor", kind, list(_KINDS) + ["tcp://HOST:PORT"])
        return _KINDS[kind](arg)
    try:
        import distributed

        if isinstance(spec, distributed.Client):
            return DaskExecutor(spec)
    except ImportError:
        pass
    if isinstance(spec, Executor):
        return spec
    raise InputError(f"executor {spec!r}: expected None, 'serial', 'local[:N]', a scheduler "
                     "address or a distributed.Client")
