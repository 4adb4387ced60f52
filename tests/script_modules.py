"""Loading a file of the repository that is not in a package (a script of ``scripts/``, a test
fixture of another test folder) as a module, once per process."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_file(name: str, path: Path) -> ModuleType:
    """The module of ``path`` under ``name`` in ``sys.modules`` (registered before it runs, so
    that its dataclasses and pickles can find it), loaded on the first call only."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
