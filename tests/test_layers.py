"""The house rules of docs/architecture.md, read from the code: every import (at the top of a
module or inside a function) runs down the layers, and no modules import each other in a circle
beyond the ones the page lists as still to be untied.

The layers, bottom first, are the page's table; a package or module not in it fails the test
until it is placed there (so a new package is placed on purpose).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fleetplan"

# docs/architecture.md, "Layers": a module may import its own layer and those below it
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "_version", "_progress", "_show", "_gc", "_notebook", "_cache_dir", "_input",
     "_request", "registry"),
    ("_json_load", "_yaml_load", "_load", "_io"),
    ("catalog", "workload"),
    ("context", "viz", "_pool"),
    ("profiles", "scenario"),
    ("replica",),
    ("validate",),
    ("_notes",),
    ("fleet",),
    ("optimize",),
    ("__init__",),
    ("bench", "report"),
    ("cli",),
)
# the imports that still run up a layer, each with its reason (docs/architecture.md)
UPWARD = {
    # the public simulate(plan=...) reads a plan file; the plan record lives with the optimizer
    ("fleetplan.fleet.simulate", "fleetplan.optimize.plan"),
    ("fleetplan.fleet.simulate", "fleetplan.optimize.plan_rules"),
}
# module circles still to be untied, each with its reason (none today; docs/architecture.md)
KNOWN_CIRCLES: set[frozenset[str]] = set()


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _graph() -> dict[str, set[str]]:
    modules = {_module(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".")
                    base = base if is_pkg else base[:-1]
                    base = base[:len(base) - node.level + 1]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                # `from pkg import module` imports the module; `from module import name`, the
                # module (a folder without __init__.py is no module of its own)
                targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in modules else stem
                           for a in node.names]
            for t in targets:
                # the longest prefix that is a module of the package
                while t and t not in modules:
                    t = t.rpartition(".")[0]
                if t and t != mod and t.startswith("fleetplan"):
                    graph[mod].add(t)
    return graph


def _layer(mod: str) -> int:
    parts = mod.split(".")
    name = parts[1] if len(parts) > 1 else "__init__"
    for i, layer in enumerate(LAYERS):
        if name in layer:
            return i
    raise AssertionError(f"{mod}: not placed in a layer of docs/architecture.md (LAYERS)")


def test_every_import_runs_down_the_layers() -> None:
    graph = _graph()
    up = sorted((a, b) for a, targets in graph.items() for b in targets
                if _layer(b) > _layer(a) and (a, b) not in UPWARD)
    assert not up, "imports that run up a layer:\n" + "\n".join(f"  {a} -> {b}" for a, b in up)


def test_the_upward_exceptions_are_still_needed() -> None:
    graph = _graph()
    stale = sorted(pair for pair in UPWARD if pair[1] not in graph.get(pair[0], set()))
    assert not stale, f"no longer imported: drop from UPWARD and the docs: {stale}"


def _circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[frozenset[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = set()
                while True:
                    m = stack.pop()
                    on.discard(m)
                    comp.add(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return out


def test_no_new_import_circle() -> None:
    graph = _graph()
    # a package's __init__ that hands its modules' names on is not a circle of concepts
    graph = {m: {t for t in ts if not (m.startswith(t + ".") or t.startswith(m + "."))}
             for m, ts in graph.items()}
    circles = _circles(graph)
    new = [sorted(c) for c in circles if c not in KNOWN_CIRCLES]
    assert not new, f"import circles: {new}"
    untied = [sorted(c) for c in KNOWN_CIRCLES if c not in circles]
    assert not untied, f"untied (drop from KNOWN_CIRCLES and the docs): {untied}"


@pytest.mark.parametrize("layer", range(len(LAYERS)))
def test_every_layer_exists(layer: int) -> None:
    names = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if p.suffix == ".py" or (p.is_dir() and any(p.glob("*.py")))}
    missing = [n for n in LAYERS[layer] if n not in names]
    assert not missing, f"LAYERS names what the package no longer has: {missing}"
