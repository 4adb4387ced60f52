"""Fixtures of the bench tests: the in-process streaming server (see bench_fake_server)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from bench_fake_server import FakeServer, Plan


@pytest.fixture
def fake_server() -> Iterator[Callable[[Callable[[int, dict[str, Any]], Plan]], FakeServer]]:
    """Factory: ``fake_server(plan_fn)`` starts a server; all are stopped after the test."""
    started: list[FakeServer] = []

    def make(plan: Callable[[int, dict[str, Any]], Plan]) -> FakeServer:
        srv = FakeServer(plan).start()
        started.append(srv)
        return srv

    yield make
    for s in started:
        s.stop()
