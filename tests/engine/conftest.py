"""Fixtures for the engine tests: a project harness with a real-clock store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ._helpers import GATES, Harness


@pytest.fixture(autouse=True)
def _clear_gates() -> Iterator[None]:
    GATES.clear()
    yield
    for value in GATES.values():  # never leave an abandoned node thread blocked
        setter = getattr(value, "set", None)
        if callable(setter):
            setter()
    GATES.clear()


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    yield harness
    harness.close()
