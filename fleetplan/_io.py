"""Atomic file writes (a reader sees the old file or the new one, never half of either), the
JSON-safe form of values every JSON writer shares, and :func:`read_data_file`, the one reader of a
user's JSON (or YAML) file with the house's one-line errors.

:func:`user_data_dir` is where commands write the user's own store and calibration by default
(never into the bundled ``data/``).

An atomic write keeps the mode of the file it replaces; a new file gets ``0o666 & ~umask``, as
``open(path, "w")`` would (not the 0600 of the temporary file). A symlink is followed: its target
is replaced (the temporary file lies beside the target) and the link stays. The temporary file
is removed on any exception (Ctrl-C too); one a killed writer left (``.<name>.*.tmp``, unlocked)
is swept on the next write of that file. Failures are one :class:`WriteError` line.

Every temporary file this process has open for writing is listed (:func:`create_temp`,
:func:`finish_temp`), so a pool worker that must end at once (its parent died:
:mod:`fleetplan._pool`) removes them first (:func:`abandon_temp_files`) instead of leaving them
to a later sweep."""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
from pathlib import Path
from typing import Any

from fleetplan.errors import InputError


def user_data_dir() -> Path:
    """fleetplan's folder of user data: ``$XDG_DATA_HOME/fleetplan``, else (Windows)
    ``%LOCALAPPDATA%/fleetplan``, else ``~/.local/share/fleetplan``. Read at call time; never
    created here."""
    base = os.environ.get("XDG_DATA_HOME") or (os.environ.get("LOCALAPPDATA")
                                               if os.name == "nt" else None)
    root = Path(base).expanduser() if base else Path.home() / ".local" / "share"
    return root / "fleetplan"


def json_safe(v: Any) -> Any:
    """``v`` with numpy scalars unwrapped, NaN/NA as None and infinities as "inf"/"-inf"
    (strict JSON has neither), through dicts, lists and tuples."""
    pd = sys.modules.get("pandas")  # pd.NA exists only once pandas is loaded
    if v is None or (pd is not None and v is pd.NA):
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float):
        if math.isnan(v):
            return None
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    if isinstance(v, dict):
        return {k: json_safe(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [json_safe(x) for x in v]
    return v


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder and ``os.replace``."""
    write_bytes_atomic(path, text.encode("utf-8"))


def _umask() -> int:
    try:  # Linux: read it without changing it
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _mode_for(target: Path) -> int:
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        return 0o666 & ~_umask()


class WriteError(InputError, OSError):
    """A file could not be written (read-only folder, disk full, a directory in the way): one
    line naming the file. It is an :class:`OSError` too, for callers that catch those."""


def _resolve(target: Path) -> Path:
    """The file a write to ``target`` must replace: a symlink's final target (relative links
    resolved against their folder), so the link stays a link; else ``target`` itself."""
    if not target.is_symlink():
        return target
    return Path(os.path.realpath(target))


def _lock(fd: int) -> None:
    """Hold an advisory lock on our temporary file while it is written, so that another
    writer's sweep (:func:`is_stale_temp`) can tell a live temporary file from a dead one."""
    with contextlib.suppress(ImportError, OSError):
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def is_stale_temp(tmp: Path) -> bool:
    """Whether a ``.<name>.*.tmp`` file was left by a dead writer (kill -9, power cut): no
    process holds its lock. Without ``fcntl`` (Windows) only files over an hour old count."""
    try:
        import fcntl
    except ImportError:
        import time

        try:
            return time.time() - tmp.stat().st_mtime > 3600
        except OSError:
            return False
    try:
        fd = os.open(tmp, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # a live writer holds it
    else:
        return True
    finally:
        os.close(fd)


def _sweep_stale(folder: Path, name: str) -> None:
    """Remove temporary files of ``name`` that dead writers left in ``folder``."""
    with contextlib.suppress(OSError):
        for tmp in folder.glob(f".{glob_escape(name)}.*.tmp"):
            if tmp.is_file() and not tmp.is_symlink() and is_stale_temp(tmp):
                with contextlib.suppress(OSError):
                    tmp.unlink()


def glob_escape(name: str) -> str:
    """``name`` with glob metacharacters quoted (``[`` ``*`` ``?``)."""
    import glob

    return glob.escape(name)


# The temporary files this process is writing. Creating one (and listing it) and replacing its
# target (and unlisting it) each happen under _GUARD, which abandon_temp_files takes for good:
# a worker ending from another thread cannot miss a file created a moment later.
_GUARD = threading.Lock()
_TEMPS: set[str] = set()


def _forget_parents_temps() -> None:
    """In a forked child: the parent's temporary files are not ours to remove, and a lock a
    parent thread held at the fork would never be released here."""
    global _GUARD
    _GUARD = threading.Lock()
    _TEMPS.clear()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_forget_parents_temps)


def create_temp(folder: str | os.PathLike[str], prefix: str, suffix: str = ".tmp", *,
                mode: int | None = None) -> tuple[int, str]:
    """A new temporary file in ``folder`` named ``prefix``, a random part and ``suffix``, open
    for writing and locked (:func:`_lock`), listed until :func:`finish_temp`: ``(fd, path)``.
    Its mode: 0600 (:func:`tempfile.mkstemp`), or ``mode`` less the umask (as ``open`` gives)."""
    import secrets
    import tempfile

    with _GUARD:
        if mode is None:
            fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=folder)
        else:
            flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_BINARY", 0))
            for _ in range(100):
                tmp = os.path.join(folder, f"{prefix}{secrets.token_hex(6)}{suffix}")
                try:
                    fd = os.open(tmp, flags, mode)
                    break
                except FileExistsError:
                    continue
            else:
                raise FileExistsError(f"{folder}: no free name for a temporary file")
        _TEMPS.add(tmp)
    _lock(fd)
    return fd, tmp


def finish_temp(tmp: str, target: str | os.PathLike[str] | None) -> None:
    """``os.replace(tmp, target)``, or with ``target=None`` remove ``tmp`` (an error path: a
    missing file is fine). Afterwards ``tmp`` is gone and no longer listed, a failed replace
    included (its error is raised)."""
    with _GUARD:
        try:
            if target is not None:
                try:
                    os.replace(tmp, target)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)
                    raise
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        finally:
            _TEMPS.discard(tmp)


def abandon_temp_files(wait_s: float = 2.0) -> None:
    """Remove every temporary file this process is writing, and keep any other thread from
    creating or renaming one from now on: for a process about to ``os._exit``. Waits up to
    ``wait_s`` for a create or a rename under way (a hung disk: remove what is listed anyway)."""
    _GUARD.acquire(timeout=wait_s)  # never released: the process is ending
    for tmp in list(_TEMPS):
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    _TEMPS.clear()


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, as a database would: a temporary file beside the
    file (beside a symlink's target, which is replaced and the link kept), flushed and synced,
    then ``os.replace``. An existing file keeps its mode (see the module docstring); the
    temporary file is removed on any exception, Ctrl-C included, and temporary files of the
    same target left by a killed writer are swept first. A failure is one
    :class:`WriteError` line naming the file."""
    given = Path(path)
    target = _resolve(given)
    try:
        if target.is_dir():
            raise WriteError(f"{given}: a directory, cannot write a file there")
        target.parent.mkdir(parents=True, exist_ok=True)
    except WriteError:
        raise
    except OSError as exc:
        raise WriteError(f"{given}: cannot create its folder {target.parent} "
                         f"({exc.strerror or exc})") from None
    _sweep_stale(target.parent, target.name)
    mode = _mode_for(target)
    tmp: str | None = None
    try:
        fd, tmp = create_temp(target.parent, f".{target.name}.")
        with os.fdopen(fd, "wb") as fh:
            os.chmod(tmp, mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            if os.name == "posix":  # replaced while still locked: no sweep can take it
                finish_temp(tmp, target)
                tmp = None
        if tmp is not None:
            finish_temp(tmp, target)
            tmp = None
        _fsync_dir(target.parent)
    except OSError as exc:
        raise WriteError(f"{given}: cannot write ({exc.strerror or exc})") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                finish_temp(tmp, None)


def read_data_file(path: str | os.PathLike[str], what: str, *, yaml_ok: bool = False,
                   hint: str = "") -> Any:
    """The parsed content of a user's file: JSON, or with ``yaml_ok`` YAML unless it is named
    ``*.json``. Every failure is one :class:`~fleetplan.errors.InputError` line naming the file:
    missing, a directory, unreadable, not UTF-8, not JSON/YAML (where), nested too deeply.
    ``what`` names the file in them (``plan file``); ``hint`` is added to a parse error."""
    # one bounded reader (fleetplan._load, issue 16): a FIFO, a device, an alias bomb, deep
    # nesting or a duplicate key is refused in one line before anything is built
    from fleetplan._load import load_data

    return load_data(path, what=what, yaml_ok=yaml_ok, hint=hint)
