"""Atomic file writes (a reader sees the old file or the new one, never half of either), the
JSON-safe form of values every JSON writer shares, and :func:`read_data_file`, the one reader of a
user's JSON (or YAML) file with the house's one-line errors.

:func:`user_data_dir` is where commands write the user's own store and calibration by default
(never into the bundled ``data/``).

An atomic write keeps the mode of the file it replaces; a new file gets ``0o666 & ~umask``, as
``open(path, "w")`` would (not the 0600 of the temporary file)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import tempfile
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


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file beside it, then ``os.replace``),
    keeping an existing file's mode (see the module docstring)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = _mode_for(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.chmod(tmp, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def read_data_file(path: str | os.PathLike[str], what: str, *, yaml_ok: bool = False,
                   hint: str = "") -> Any:
    """The parsed content of a user's file: JSON, or with ``yaml_ok`` YAML unless it is named
    ``*.json``. Every failure is one :class:`~fleetplan.errors.InputError` line naming the file:
    missing, a directory, unreadable, not UTF-8, not JSON/YAML (where), nested too deeply.
    ``what`` names the file in them (``plan file``); ``hint`` is added to a parse error."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{p}: no such {what}") from None
    except IsADirectoryError:
        raise InputError(f"{p}: a directory, not a {what}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{p}: not UTF-8 text (byte {exc.start}), not a {what}") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read the {what} ({exc.strerror or exc})") from None
    tail = f"; {hint}" if hint else ""
    try:
        if yaml_ok and p.suffix.lower() != ".json":
            import yaml

            try:
                return yaml.safe_load(text)
            except yaml.YAMLError as exc:
                first = " ".join(str(exc).split())
                raise InputError(f"{p}: not valid YAML: {first[:200]}{tail}") from None
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
                         f"{tail}") from None
    except RecursionError:
        raise InputError(f"{p}: nested too deeply to read as a {what}") from None
