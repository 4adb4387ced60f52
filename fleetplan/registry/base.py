"""The registry of one plug-in family: names -> members, filled by decorator, duplicates refused.

:class:`Registry` is what every family of fleetplan (solvers, routing policies, arrival
processes, ingest formats) keeps its members in. It sits at the bottom of the package (it imports
nothing of fleetplan but the errors), so the scenario schema can read a family's names and
validate against them without importing the layer that implements the members (the fleet, the
optimizer).

How members get in before a lookup: a member registers itself where it is defined
(``@REGISTRY.register("name")`` on the class or function, :meth:`Registry.add` for plain data),
and a family whose built-in members live in modules above its readers names those modules as
its *providers* (dotted module names: configuration, not imports). The first read of the
registry (a lookup, ``in``, iteration, ``len``) or the first registration imports the
providers, in the order given, so a member is valid in a scenario whichever module the caller
happened to import first, and a user's duplicate of a built-in name is refused at its own
decorator, never later. Importing the providers is the only thing a read does beyond the
mapping; nothing is imported at import time. Members iterate in the providers' order (a
member's provider is its ``origin``: by default the module that defines it), then the others in
the order they were registered, whichever provider was imported first: where the order decides
something (the first ingest format that recognises a file), it is the same in every process.

Duplicates are refused by :meth:`Registry.register` / :meth:`Registry.add` with a
``ValueError`` naming both members; item assignment (``REGISTRY[name] = member``) replaces on
purpose (a test's stand-in) and ``del REGISTRY[name]`` removes a member. Unknown names fail in
:meth:`Registry.lookup` with an :class:`~fleetplan.errors.UnknownNameError` listing the valid
ones (PuLP's ``getSolver``, GuideLLM's registry).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from typing import TypeVar

from fleetplan.errors import UnknownNameError

T = TypeVar("T")


def describe(member: object) -> str:
    """``module.QualName`` of a class or function, else the value's ``repr``."""
    name = getattr(member, "__qualname__", None)
    module = getattr(member, "__module__", None)
    if isinstance(name, str) and isinstance(module, str):
        return f"{module}.{name}"
    return repr(member)


class Registry(MutableMapping[str, T]):
    """Members of one plug-in family by name (``kind`` names the family in messages:
    ``routing policy``); ``providers``: modules whose import registers the built-in members."""

    def __init__(self, kind: str, *, providers: Sequence[str] = (),
                 origin: Callable[[T], str] | None = None) -> None:
        self.kind = kind
        self.providers = tuple(providers)
        self._origin = origin or (lambda member: str(getattr(member, "__module__", "")))
        self._members: dict[str, T] = {}
        self._loaded = not self.providers

    def _load(self) -> None:
        if self._loaded:
            return
        # set first: a provider's own registrations come back here while it is imported (and
        # an import of a provider already under way returns the module as it stands)
        self._loaded = True
        try:
            for module in self.providers:
                importlib.import_module(module)
        except BaseException:
            self._loaded = False
            raise

    def add(self, name: str, member: T) -> T:
        """Register ``member`` as ``name``; a name already taken is refused, naming both."""
        self._load()
        old = self._members.get(name)
        if old is not None:
            raise ValueError(f"{self.kind} {name!r} is already registered ({describe(old)}); "
                             f"refused {describe(member)}")
        self._members[name] = member
        if self.providers:  # stable: the providers' order, then registration order
            rank = {module: i for i, module in enumerate(self.providers)}
            self._members = dict(sorted(self._members.items(), key=lambda kv: rank.get(
                self._origin(kv[1]), len(rank))))
        return member

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@REGISTRY.register("name")`` registers the class or function it wraps."""
        def deco(member: T) -> T:
            return self.add(name, member)

        return deco

    def lookup(self, name: str) -> T:
        """The member registered as ``name``; an unknown name fails with the valid ones."""
        self._load()
        if name not in self._members:
            raise UnknownNameError(self.kind, name, self._members)
        return self._members[name]

    def names(self) -> list[str]:
        """The registered names, in registration order."""
        self._load()
        return list(self._members)

    def __getitem__(self, name: str) -> T:
        self._load()
        return self._members[name]

    def __setitem__(self, name: str, member: T) -> None:
        self._load()
        self._members[name] = member

    def __delitem__(self, name: str) -> None:
        self._load()
        del self._members[name]

    def __iter__(self) -> Iterator[str]:
        self._load()
        return iter(list(self._members))

    def __len__(self) -> int:
        self._load()
        return len(self._members)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._members

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._members)})"
