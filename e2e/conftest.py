"""The e2e drills' fixtures: a project with the drills' fast settings, and CLI children.

The project, its hosts and the polling helpers live in ``e2e.harness``
(shared with the host bench); this module only makes one per test and
cleans up after it, and the CLI children of the session drills
(``e2e.sessions_kit``). Shared workflow source is ``e2e.snippets``: no
module imports this one. Imports pytest, ``e2e.harness`` and
``e2e.sessions_kit``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.pg import pg_database_url, pg_schema_url, pg_url  # noqa: F401  (fixtures)

from .harness import Project, clean_env
from .sessions_kit import Children


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    root = tmp_path / "proj"
    root.mkdir()
    # Short leases and polls so recovery drills take seconds, not the product's defaults.
    env = clean_env(tmp_path / "home", **{
        "PI_WORKFLOWS_LEASE_MS": "4000",
        "PI_WORKFLOWS_RENEW_MS": "500",
        "PI_WORKFLOWS_POLL_INTERVAL_S": "0.2",
        "PI_WORKFLOWS_HUNG_KILL_AFTER_S": "1",
        "PI_WORKFLOWS_DRAIN_GRACE_S": "5",
        "PI_WORKFLOWS_RESTART_BACKOFF_S": "0.1",
        "PI_WORKFLOWS_FSYNC": "never",
    })
    proj = Project(root, env)
    yield proj
    # Hosts, workers and their children (they carry the marker): leave nothing behind.
    proj.cleanup()


@pytest.fixture
def children(project: Project) -> Iterator[Children]:
    """CLI subprocesses a drill leaves running (activate, sync --follow): killed after it."""
    kids = Children(project)
    yield kids
    kids.kill_all()

