"""On-disk cache of simulation-derived figures (capacities at SLO, simulated points, the
checks of simulated plans).

Entries are JSON files named by the SHA-256 of a canonical JSON of *every* input that decides
the value (model, configuration, replica parameters, length model, burstiness, SLO, method
settings and :func:`code_key`: the package version and a hash of the model code), so a
recalibration, a changed setting or an edited replica model never reads a stale value. The
folder is ``$FLEETPLAN_CACHE_DIR`` or ``~/.cache/fleetplan``; it is created on the first write,
never at import. Writes are atomic, so parallel workers (local processes, Dask) can share one
folder. A write's temporary file is locked while written and listed for a worker that must end
at once (:func:`fleetplan._io.abandon_temp_files`); those of writers killed mid-write are swept
by a process's first write to the folder (:func:`sweep_temp_files`).

Nothing read back is trusted. An entry carries its format version (:data:`FORMAT`), its
namespace, its key (the file's name) and a SHA-256 checksum of all of them with the inputs and
the value; the caller's ``check`` then validates the value's shape and ranges (finite,
non-negative, consistent). An entry that fails any of this (unreadable, not a regular file, too
large, not JSON, an older format, another key, a checksum that does not match a tampered value,
NaN or a negative rate, mis-shaped) is a miss: the value is recomputed and rewritten, and the
entry is listed in :attr:`DiskCache.rejected` (path and reason), which the optimizer reports in
one warning line (:func:`fleetplan._progress.warn`). The checksum finds edits and corruption,
not a forger who recomputes it: the cache is the user's own folder.

Main entries: :class:`DiskCache`, :func:`default_cache`, :func:`input_hash`, :func:`code_key`
(the model code, for capacities) and :func:`package_key` (all of it, for plan verifications);
``fleetplan cache info`` / ``fleetplan cache clear`` inspect and empty the folder.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import re
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from fleetplan._cache_dir import user_cache_dir
from fleetplan._io import create_temp, finish_temp, is_stale_temp
from fleetplan._progress import warn
from fleetplan._version import __version__
from fleetplan.errors import FleetplanError

# The code whose behaviour decides a simulated capacity, relative to the package folder: every
# module of these subpackages, and these single modules.
MODEL_CODE = ("replica", "workload", "optimize/capacity.py", "optimize/capacity_records.py",
              "optimize/bracket.py")
_PACKAGE = Path(__file__).resolve().parent.parent
_ENTRY = re.compile(r"[0-9a-f]{64}\.json")
_TEMP = re.compile(r"\.[0-9a-f]{64}\.json\..+\.tmp")  # left by a write that was killed
STALE_TEMP_S = 3600.0  # clear removes temporary files older than this (unlocked ones at once)
SWEEP_MIN_AGE_S = 10.0  # a process's first write sweeps dead writers' files older than this
FORMAT = 2  # entry format: 1 (no version field) had key, inputs and value only
MAX_ENTRY_BYTES = 1 << 20  # an entry is a few hundred bytes; a larger file is not one


def _is_entry(f: Path, sub: Path) -> bool:
    """``f`` is an entry file of the folder ``sub`` (``<xx>/<sha256>.json``, ``xx`` its start)."""
    return f.is_file() and _ENTRY.fullmatch(f.name) is not None and f.name[:2] == sub.name


def _model_files() -> list[Path]:
    files: list[Path] = []
    for rel in MODEL_CODE:
        p = _PACKAGE / rel
        files += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return files


@functools.cache
def code_key() -> str:
    """``<version>+<hash>``: the package version and a SHA-256 (first 16 hex digits) of the
    source of :data:`MODEL_CODE` and of the runtime versions (:func:`_source_key`); part of every
    cache key, computed once per process. Any edit of the replica model, the workload code or
    the capacity search makes new keys."""
    return _source_key(_model_files())


@functools.cache
def package_key() -> str:
    """``<version>+<hash>``: like :func:`code_key` over the source of the whole package (every
    module a fleet simulation may run: router, accounting, scenario records as well as the
    replica model); the key of cached plan verifications, computed once per process."""
    return _source_key(sorted(_PACKAGE.rglob("*.py")))


def _source_key(files: list[Path]) -> str:
    """The package version and a hash of ``files`` (paths and bytes) and of the Python, NumPy,
    SimPy and Numba versions, whose random streams, event order and compiled arithmetic decide a
    simulation (Numba's version read from its metadata: no import)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    import numpy
    import simpy

    h = hashlib.sha256()
    runtime = f"python {platform.python_version()} numpy {numpy.__version__} simpy "
    try:
        numba_version = version("numba")
    except PackageNotFoundError:  # pragma: no cover - a declared dependency
        numba_version = "?"
    runtime += str(getattr(simpy, "__version__", "?")) + f" numba {numba_version}"
    h.update(runtime.encode("utf-8") + b"\0")
    for f in files:
        h.update(f.relative_to(_PACKAGE).as_posix().encode("utf-8") + b"\0")
        h.update(f.read_bytes() + b"\0")
    return f"{__version__}+{h.hexdigest()[:16]}"


def _canonical(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return _canonical(obj.model_dump(mode="json", by_alias=True))
    if isinstance(obj, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, list | tuple):
        return [_canonical(v) for v in obj]
    if hasattr(obj, "__dataclass_fields__"):
        return _canonical({f: getattr(obj, f) for f in obj.__dataclass_fields__})
    if isinstance(obj, float):
        if math.isnan(obj):
            return "nan"
        if math.isinf(obj):
            return "inf" if obj > 0 else "-inf"
        return obj
    if hasattr(obj, "item"):  # numpy scalars
        return _canonical(obj.item())
    if hasattr(obj, "value") and not isinstance(obj, str | int | bool):  # enums
        return _canonical(obj.value)
    return obj


def input_hash(inputs: Any) -> str:
    """SHA-256 hex digest of the canonical JSON of ``inputs``."""
    text = json.dumps(_canonical(inputs), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def default_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The cache folder: ``cache_dir`` when given (a data context's,
    :attr:`fleetplan.context.DataContext.cache_dir`), else ``$FLEETPLAN_CACHE_DIR``, else
    ``~/.cache/fleetplan`` (read at call time)."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    return user_cache_dir()


def cache_root(cache_dir: str | os.PathLike[str] | bool | None,
               default: str | os.PathLike[str] | None = None) -> str | None:
    """The folder a ``cache_dir`` argument names: ``True`` the default
    (:func:`default_cache_dir` of ``default``, a data context's ``cache_dir``), a path that path,
    ``False`` / ``None`` none (memory only). The folder is a string that travels with each
    capacity job to the worker that runs it."""
    if cache_dir is True:
        return str(default_cache_dir(default))
    if cache_dir is None or cache_dir is False:
        return None
    return str(cache_dir)


_WARNED: set[str] = set()  # cache folders already reported unusable in this process


def _unusable(root: Path) -> str | None:
    """Why ``root`` cannot hold a cache (a file, or under one), or None: a folder that is
    missing is made on the first write."""
    p = root
    while not p.exists() and p != p.parent:
        p = p.parent
    if not p.is_dir():
        return "a file, not a folder" if p == root else f"{p} is a file, not a folder"
    return None


class DiskCache:
    """JSON entries under ``root/<namespace>/<hash[:2]>/<hash>.json``; ``root=None``: memory only.

    An in-process dictionary sits in front of the disk, so repeated look-ups in one run are free.
    """

    def __init__(self, root: str | os.PathLike[str] | None) -> None:
        self.root = Path(root) if root is not None else None
        if self.root is not None and (why := _unusable(self.root)):
            # one warning for the folder, not one per entry that could not be read or written
            if str(self.root) not in _WARNED:
                _WARNED.add(str(self.root))
                warn(None, f"cache folder {self.root}: {why}; nothing is cached on disk this run")
            self.root = None
        self._memory: dict[tuple[str, str], dict[str, Any]] = {}
        self.rejected: list[tuple[str, str]] = []  # (path, reason) of entries refused by get

    def _path(self, namespace: str, key: str) -> Path:
        assert self.root is not None
        return self.root / namespace / key[:2] / f"{key}.json"

    def get(self, namespace: str, inputs: Any,
            check: Callable[[dict[str, Any]], object] | None = None) -> dict[str, Any] | None:
        """The stored value for ``inputs``, or ``None`` when absent or when the entry fails
        validation (module docstring; then it is also listed in :attr:`rejected`). ``check``
        validates the value (raises ``ValueError``, ``TypeError`` or ``KeyError`` to refuse)."""
        key = input_hash(inputs)
        hit = self._memory.get((namespace, key))
        if hit is not None or self.root is None:
            return hit
        path = self._path(namespace, key)
        value, why = _read_entry(path, namespace, key)
        if value is not None and check is not None:
            try:
                check(value)
            except (ValueError, TypeError, KeyError) as exc:
                value, why = None, f"invalid value ({_short(exc)})"
        if value is None:
            if why is not None:
                self.rejected.append((str(path), why))
            return None
        self._memory[(namespace, key)] = value
        return value

    def put(self, namespace: str, inputs: Any, value: dict[str, Any]) -> None:
        """Store ``value`` (a JSON-able dict) for ``inputs``; the inputs are kept beside it,
        with the format version and the checksum. A value that is not strict JSON (NaN), or one
        that cannot be written (a folder in the entry's place, a read-only cache), stays in
        memory only: a cache never fails the computation it serves."""
        key = input_hash(inputs)
        self._memory[(namespace, key)] = value
        if self.root is None:
            return
        record = {"format": FORMAT, "namespace": namespace, "key": key,
                  "inputs": _canonical(inputs), "value": value}
        try:
            record["checksum"] = _checksum(record)
        except ValueError:  # NaN or infinity in the value: never written, so never read back
            return
        # e.g. a folder where the entry goes, a read-only cache: the value stays in memory only
        with contextlib.suppress(OSError, FleetplanError):
            _sweep_once(self.root)  # what writers killed mid-write left (once per process)
            _write_entry(self._path(namespace, key),
                         json.dumps(record, sort_keys=True, allow_nan=False) + "\n")

    def _entry_dirs(self) -> list[Path]:
        if self.root is None or not self.root.is_dir():
            return []
        return [sub for ns in sorted(p for p in self.root.iterdir() if p.is_dir())
                for sub in sorted(p for p in ns.iterdir()
                                  if p.is_dir() and re.fullmatch(r"[0-9a-f]{2}", p.name))]

    def entry_files(self) -> Iterator[Path]:
        """Every entry file under ``root`` (``<namespace>/<xx>/<sha256>.json``), nothing else."""
        for sub in self._entry_dirs():
            for f in sorted(sub.iterdir()):
                if _is_entry(f, sub):
                    yield f

    def clear(self) -> int:
        """Remove every entry file, the temporary files of interrupted writes (no writer holds
        them, or older than :data:`STALE_TEMP_S`), and the folders left empty; other files
        stay. Returns how many entries were removed."""
        n = 0
        for sub in self._entry_dirs():
            for f in sorted(sub.iterdir()):
                if _is_entry(f, sub):
                    f.unlink(missing_ok=True)
                    n += 1
                elif (f.is_file() and _TEMP.fullmatch(f.name)
                      and (f.stat().st_mtime < time.time() - STALE_TEMP_S or is_stale_temp(f))):
                    f.unlink(missing_ok=True)  # a write running now keeps its (locked) file
            for folder in (sub, sub.parent):
                try:
                    folder.rmdir()
                except OSError:  # not empty
                    break
        self._memory.clear()
        return n

    def __getstate__(self) -> dict[str, Any]:  # workers start with an empty memory layer
        return {"root": self.root, "_memory": {}, "rejected": []}


def _write_entry(path: Path, text: str) -> None:
    """Write an entry atomically (temporary file beside it, then ``os.replace``: a reader sees
    the old entry or the new one), without the ``fsync`` of :func:`fleetplan._io.atomic_write_text`
    (4 ms an entry here, 0.3 ms without; a cold 100-class solve writes ~10^4 entries): a cache
    needs no durability, since an entry a crash cut short fails its checksum and is
    recomputed. The temporary file is locked while written (a sweep leaves it alone,
    :func:`sweep_temp_files`), listed for a worker that must end at once
    (:func:`fleetplan._io.abandon_temp_files`) and removed on any exception."""
    if path.is_symlink() or path.is_dir():
        raise OSError(f"{path}: not an entry file")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = create_temp(path.parent, f".{path.name}.", mode=0o666)  # the umask applies
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8"))
            finish_temp(tmp, path)  # still locked: no sweep can take it
            tmp = ""
    finally:
        if tmp:
            finish_temp(tmp, None)


def sweep_temp_files(root: str | os.PathLike[str], min_age_s: float = 0.0) -> int:
    """Remove the temporary files of entry writes that dead writers left under ``root`` (a
    worker or solve killed mid-write): unlocked by any process (where locks exist; elsewhere
    only those older than :data:`STALE_TEMP_S`) and at least ``min_age_s`` old (a file a writer
    has created but not yet locked is younger). Returns how many were removed."""
    n = 0
    now = time.time()
    for sub in DiskCache(root)._entry_dirs():
        with contextlib.suppress(OSError):
            for f in sub.iterdir():
                if not _TEMP.fullmatch(f.name):
                    continue
                try:
                    st = f.lstat()
                except OSError:
                    continue
                if (stat.S_ISREG(st.st_mode) and st.st_mtime <= now - min_age_s
                        and is_stale_temp(f)):
                    with contextlib.suppress(OSError):
                        f.unlink()
                        n += 1
    return n


_SWEPT: set[tuple[int, str]] = set()  # (process, root) swept once, on its first write


def _sweep_once(root: Path) -> None:
    mark = (os.getpid(), str(root))
    if mark not in _SWEPT:
        _SWEPT.add(mark)
        sweep_temp_files(root, min_age_s=SWEEP_MIN_AGE_S)


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."


def _checksum(record: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical strict JSON of ``record`` without its checksum (ValueError on
    NaN or infinity)."""
    body = {k: v for k, v in record.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number of strict JSON")


def _read_entry(path: Path, namespace: str, key: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the value of the entry at ``path``, None) or (None, why it is refused); (None, None)
    when there is no entry. Never raises for what the file holds."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"unreadable ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read, a device never end
        return None, "not a regular file"
    if st.st_size > MAX_ENTRY_BYTES:
        return None, f"{st.st_size} bytes, larger than any entry"
    try:
        text = path.read_bytes().decode("utf-8")
        record = json.loads(text, parse_constant=_reject_constant)
    except OSError as exc:
        return None, f"unreadable ({exc.strerror or exc})"
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except RecursionError:
        return None, "nested too deeply"
    except ValueError as exc:
        return None, f"not JSON ({_short(exc)})"
    if not isinstance(record, dict):
        return None, f"not an entry (a JSON {type(record).__name__})"
    if record.get("format") != FORMAT:
        return None, f"entry format {record.get('format', 1)!r}, not {FORMAT}"
    if record.get("key") != key or record.get("namespace") != namespace:
        return None, "the entry's key is not its file's"
    value = record.get("value")
    if not isinstance(value, dict):
        return None, "no value record"
    try:
        ok = record.get("checksum") == _checksum(record)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        return None, "checksum mismatch (edited or corrupted)"
    return value, None


def default_cache(cache_dir: str | os.PathLike[str] | None = None) -> DiskCache:
    """The cache in :func:`default_cache_dir` (of ``cache_dir``, a data context's)."""
    return DiskCache(default_cache_dir(cache_dir))
