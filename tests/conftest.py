"""Shared fixtures: private temp state, a controllable clock, store factories, and the
engine harness (``h``) with its ``GATES`` cleared around every test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pi_workflows.protocol.store import RunSource, Store

from tests.helpers.clocks import FakeClock
from tests.helpers.engine import GATES, Harness
from tests.helpers.pg import pg_database_url, pg_schema_url, pg_url  # noqa: F401  (fixtures)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the real ~/.pi: every PI_WORKFLOWS_ path is per test."""
    for var in ("PI_WORKFLOWS_STATE_DIR", "PI_WORKFLOWS_STORE_FILE", "PI_WORKFLOWS_RUNS_DIR",
                "PI_WORKFLOWS_HOST_LOCK", "PI_WORKFLOWS_LOG_DIR", "PI_WORKFLOWS_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PI_WORKFLOWS_HOME", str(tmp_path / "home"))


@pytest.fixture
def clock() -> FakeClock[int]:
    return FakeClock()


@pytest.fixture
def mono() -> FakeClock[float]:
    """The store's monotonic clock: how long it has watched a claim make no progress."""
    return FakeClock(1000.0)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "store.sqlite3"


@pytest.fixture
def store_url() -> str | None:
    """The store's PostgreSQL URL: None here (SQLite); the store's contract suite
    overrides it to run on both backends (tests/protocol/store/conftest.py)."""
    return None


@pytest.fixture
def make_store(store_path: Path, store_url: str | None, clock: FakeClock[int],
               mono: FakeClock[float]) -> Iterator[Callable[..., Store]]:
    opened: list[Store] = []

    def factory(**kwargs: object) -> Store:
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("monotonic", mono)
        kwargs.setdefault("lease_ms", 30_000)
        kwargs.setdefault("url", store_url)
        store = Store(store_path, **kwargs)  # type: ignore[arg-type]
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store: Callable[..., Store]) -> Store:
    return make_store()


@pytest.fixture
def source() -> RunSource:
    return RunSource("echo", "/project/.pi/workflows/echo.workflow.py", "ab" * 32,
                     "sha256:" + "0" * 64)


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
    """A project with workflow files, a real-clock store and a runs directory."""
    harness = Harness(tmp_path)
    yield harness
    harness.close()


@pytest.fixture
def cli(h: Harness, monkeypatch: pytest.MonkeyPatch) -> Harness:
    """``h`` with the CLI pointed at its state and runs, for ``run_cli`` from outside it."""
    monkeypatch.setenv("PI_WORKFLOWS_STATE_DIR", str(h.root / "state"))
    monkeypatch.setenv("PI_WORKFLOWS_RUNS_DIR", str(h.runs))
    return h
