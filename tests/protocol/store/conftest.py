"""The store's contract suite runs on both backends: one suite, parametrized.

Every test here that opens a store through ``make_store``/``store`` runs
twice: on a SQLite file and on a fresh PostgreSQL schema (the
``pg_schema_url`` fixture, a real server; skipped with its reason where
PostgreSQL is absent). A module about the SQLite file itself (its layout,
pragmas, upgrade, sidecars) says ``pytestmark = pytest.mark.sqlite_only``.
"""

from __future__ import annotations

import pytest

BACKENDS = ("sqlite", "postgres")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sqlite_only: a store test about the SQLite file itself")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store_backend" not in metafunc.fixturenames:
        return
    only_sqlite = metafunc.definition.get_closest_marker("sqlite_only") is not None
    metafunc.parametrize("store_backend", BACKENDS[:1] if only_sqlite else BACKENDS)


@pytest.fixture
def store_url(store_backend: str, request: pytest.FixtureRequest) -> str | None:
    """None for SQLite; a URL naming a new, empty PostgreSQL schema otherwise."""
    if store_backend == "sqlite":
        return None
    return str(request.getfixturevalue("pg_schema_url"))
