"""The on-disk cache as ``fleetplan cache`` shows and clears it, as library calls.

:func:`cache_info` (where the cache is, its entries and bytes, the current code key: a
:class:`CacheInfo`) and :func:`clear_cache` (its entries and the compiled engine's machine code
removed: a :class:`ClearedCache`). The cache itself is :mod:`fleetplan.optimize.cache`.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class CacheInfo:
    """The cache folder, how many entries it holds and their bytes, and the code key every
    entry's key holds (entries of other code are never read)."""

    folder: str
    entries: int
    bytes: int
    code_key: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``fleetplan cache info --format json``."""
        return asdict(self)


@dataclass(frozen=True)
class ClearedCache:
    """What :func:`clear_cache` removed: ``entries`` from ``folder``, ``jit_files`` compiled
    engine files from ``jit_folder``."""

    entries: int
    folder: str
    jit_files: int
    jit_folder: str


def cache_info(cache_dir: str | os.PathLike[str] | None = None) -> CacheInfo:
    """The cache in ``cache_dir`` (a data context's), else of this process's settings
    (``$FLEETPLAN_CACHE_DIR``, else ~/.cache/fleetplan)."""
    from fleetplan.optimize.cache import code_key, default_cache, default_cache_dir

    cache = default_cache(cache_dir)
    files = list(cache.entry_files()) if cache.root is not None else []
    return CacheInfo(folder=str(default_cache_dir(cache_dir)), entries=len(files),
                     bytes=sum(f.stat().st_size for f in files), code_key=code_key())


def clear_cache(cache_dir: str | os.PathLike[str] | None = None) -> ClearedCache:
    """Remove fleetplan's cache entries (in ``cache_dir``, a data context's, else the default
    folder) and the compiled engine's files (jit/); other files in the folder stay."""
    from fleetplan.optimize.cache import default_cache, default_cache_dir
    from fleetplan.replica.steady_kernel import clear_jit_cache, jit_cache_dir

    cache = default_cache(cache_dir)
    n = cache.clear() if cache.root is not None else 0
    jit = clear_jit_cache()
    return ClearedCache(entries=n, folder=str(default_cache_dir(cache_dir)), jit_files=jit,
                        jit_folder=str(jit_cache_dir()))
