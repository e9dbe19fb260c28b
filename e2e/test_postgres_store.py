"""The whole product on a PostgreSQL store, one machine: a host drains detached runs,
and after kill -9 of the host and its workers a new host finishes them at their node.

The store is a fresh database on a real PostgreSQL server (``pg_database_url``);
no SQLite file is ever made. Bundles stay in the local runs directory (moving
them into the database is the next part of issue 26, docs/store.md).
"""

from __future__ import annotations

import os
import signal

import pytest

from .harness import Project, alive, wait_for
from .snippets import ONCE_HELD as ONCE

pytestmark = pytest.mark.slow  # real hosts, workers and a real PostgreSQL server



@pytest.fixture
def pg_project(project: Project, pg_database_url: str) -> Project:
    project.env["PI_WORKFLOWS_STORE_URL"] = pg_database_url
    return project


@pytest.mark.timeout(120)
def test_a_host_on_postgres_runs_detached_runs_and_lists_them(pg_project: Project) -> None:
    project = pg_project
    project.write_workflow("once", ONCE)
    project.release()  # nothing holds
    project.start_host("--concurrency", "2")
    runs = [project.detach("once") for _ in range(4)]
    wait_for(lambda: all(project.row(r).state == "done" for r in runs), timeout=60,
             what="every run done", diag=lambda: project.diagnose(runs))
    assert len(project.lines("first.txt")) == 4 and len(project.lines("last.txt")) == 4
    listed = project.cli("list").stdout
    assert all(r in listed for r in runs)
    assert "pi-workflows.pgstore.v1" in project.cli("doctor", check=False).stdout
    assert not project.paths.store_file.exists()  # the SQLite default was never made


@pytest.mark.timeout(150)
def test_kill9_of_the_host_and_its_workers_loses_nothing_and_repeats_nothing(
        pg_project: Project) -> None:
    project = pg_project
    # A lease far past the test: the new host must prove the old one dead by pid.
    project.env["PI_WORKFLOWS_LEASE_MS"] = "600000"
    project.env["PI_WORKFLOWS_RENEW_MS"] = "100000"
    project.write_workflow("once", ONCE)
    host = project.start_host("--concurrency", "3")
    runs = [project.detach("once") for _ in range(3)]
    wait_for(lambda: len(project.lines("hold.started")) == 3, what="three runs holding",
             diag=lambda: project.diagnose(runs))
    workers = [p["pid"] for r in runs for p in project.state_processes(r)
               if p["role"] == "worker"]
    assert len(workers) == 3
    for pid in [host.pid, *workers]:
        os.kill(pid, signal.SIGKILL)
    host.wait()
    for pid in workers:
        wait_for(lambda pid=pid: not alive(pid), timeout=10, what=f"worker {pid} gone")
    assert all(project.row(r).state == "running" for r in runs)  # claims of the dead
    project.release()
    project.start_host("--concurrency", "3", log="host2.log")
    wait_for(lambda: all(project.row(r).state == "done" for r in runs), timeout=60,
             what="all runs done under the new host", diag=lambda: project.diagnose(runs))
    # Each run's first step ran once; the held step ran again, the last once.
    assert len(project.lines("first.txt")) == 3
    assert len(project.lines("last.txt")) == 3
