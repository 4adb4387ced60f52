"""Limits on a user's input and the bounded reading of its files (one concept: what fleetplan
will read at all, checked before anything large is read or built).

Main entries: :func:`read_text_bounded` ``(path, *, what, max_bytes)`` (the UTF-8 text of a
*regular* file: a directory, FIFO, device or socket is refused by its type before it is opened,
so a FIFO cannot hang a read and ``/dev/zero`` cannot fill memory), :func:`read_bytes_bounded`
(the bytes), :func:`check_regular_file` (only the type check, for readers that open the file
themselves) and the default limits :data:`MAX_BYTES`, :data:`MAX_DEPTH`, :data:`MAX_ALIASES`,
:data:`MAX_NODES` the JSON and YAML parsers (:mod:`fleetplan._json_load`,
:mod:`fleetplan._yaml_load`) apply. Every failure is one :class:`~fleetplan.errors.InputError`
line naming the file; a limit passed raises :class:`~fleetplan.errors.InputLimitError` with the
figure. Import these through :mod:`fleetplan._load`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from fleetplan.errors import InputError, InputLimitError

MAX_BYTES = 16 * 1024 * 1024
"""Largest file read by default (16 MiB: a scenario of 10^5 classes is ~5 MiB)."""
MAX_DEPTH = 64
"""Deepest nesting of lists/mappings accepted by default (a scenario nests 5 levels)."""
MAX_ALIASES = 1000
"""Most YAML alias uses (``*name``) accepted by default."""
MAX_NODES = 1_000_000
"""Most YAML values (scalars, lists, mappings), as written and once every alias is expanded:
what a consumer of the value will walk (a 10^5-class scenario has ~5 x 10^5; PyYAML holds
~370 bytes per node while it builds, so this bounds a YAML load to ~400 MB)."""


# --- files -------------------------------------------------------------------------------------

def _kind(mode: int) -> str | None:
    """What a non-regular file is, by its ``st_mode`` (``None``: a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_regular_file(path: str | os.PathLike[str], *, what: str) -> os.stat_result:
    """``os.stat`` of ``path`` (following symlinks) when it is an existing regular file; else one
    :class:`InputError` line (missing, a directory, a FIFO, a device ...). Opens nothing."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError(f"{p}: no such {what}") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read the {what} ({exc.strerror or exc})") from None
    kind = _kind(st.st_mode)
    if kind is not None:
        raise InputError(f"{p}: {kind}, not a {what} (a regular file)")
    return st


def read_bytes_bounded(path: str | os.PathLike[str], *, what: str,
                       max_bytes: int = MAX_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (see :func:`read_text_bounded`)."""
    p = Path(path)
    st = check_regular_file(p, what=what)
    if st.st_size > max_bytes:
        raise InputLimitError(f"{p}: {st.st_size} bytes, more than the {max_bytes} a {what} may "
                              "have")
    try:
        # O_NONBLOCK: should the path have become a FIFO since the stat, opening cannot hang
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise InputError(f"{p}: cannot read the {what} ({exc.strerror or exc})") from None
    try:
        kind = _kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise InputError(f"{p}: {kind}, not a {what} (a regular file)")
        chunks, got = [], 0
        while got <= max_bytes:  # the file may grow after the stat: never read past the limit
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise InputError(f"{p}: cannot read the {what} ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if got > max_bytes:
        raise InputLimitError(f"{p}: more than the {max_bytes} bytes a {what} may have")
    return b"".join(chunks)


def read_text_bounded(path: str | os.PathLike[str], *, what: str,
                      max_bytes: int = MAX_BYTES) -> str:
    """The UTF-8 text of the regular file ``path``, at most ``max_bytes`` bytes.

    Refused, each as one :class:`InputError` line naming the file: missing, not a regular file
    (directory, FIFO, device, socket: by ``os.stat`` type, before opening), larger than
    ``max_bytes`` (:class:`~fleetplan.errors.InputLimitError`), unreadable, not UTF-8.
    ``what`` names the file in the messages (``scenario file``).
    """
    data = read_bytes_bounded(path, what=what, max_bytes=max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{Path(path)}: not UTF-8 text (byte {exc.start}), not a {what}") \
            from None


def source_text(path_or_text: str | os.PathLike[str], what: str, source: str | None,
          max_bytes: int) -> tuple[str, str]:
    if isinstance(path_or_text, str):
        if len(path_or_text) > max_bytes:
            raise InputLimitError(f"{source or what}: {len(path_or_text)} characters, more than "
                                  f"the {max_bytes} a {what} may have")
        return path_or_text, source or what
    return read_text_bounded(path_or_text, what=what, max_bytes=max_bytes), \
        source or str(path_or_text)


# --- shared by the parsers ---------------------------------------------------------------------

def value_error_text(exc: ValueError) -> str:
    text = str(exc)
    if "integer string conversion" in text:
        return "an integer of more than 4300 digits"
    return text[:120]


def line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1
