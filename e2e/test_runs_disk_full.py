"""A full runs directory (issue 21 items 14 and 16): the host serves on, no crash budget.

The runs directory (``PI_WORKFLOWS_RUNS_DIR``) is put on a small tmpfs of its
own, the store and the logs stay on the ordinary disk, and the tmpfs is
filled to the last byte by a filler file. A real host and its workers must
then: keep serving (never exit), park an interrupted run blocked with
``disk_full`` (not a crash, no traceback), start no run while full, and
carry on by themselves once the filler is removed. Skipped where this
process may not mount a tmpfs (it needs root or CAP_SYS_ADMIN).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pi_workflows.supervisor.drill.smalldisk import fill, free, mount_tmpfs, unmount

from .harness import Project, clean_env, wait_for
from .snippets import HOLD

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]  # real processes: an e2e drill

# A node that holds until released, then a few more transitions to write.
HELD = HOLD + """
from pi_workflows import define_workflow, compute, edge

workflow = define_workflow(
    start_at="hold",
    nodes=[compute("hold", hold("hold")), compute("after", lambda ctx: {"x": "y" * 2000}),
           compute("end", lambda ctx: {"ok": True})],
    edges=[edge("hold", "after"), edge("after", "end")],
)
"""
QUICK = """
from pi_workflows import define_workflow, compute
workflow = define_workflow(start_at="one", nodes=[compute("one", lambda ctx: {"ok": 1})])
"""


@pytest.fixture
def runs_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "runsdisk"
    why = mount_tmpfs(mount, 4 * 1024 * 1024)
    if why is not None:
        pytest.skip(why)
    try:
        yield mount
    finally:
        unmount(mount)  # never leave a tmpfs behind, whatever the test did


@pytest.fixture
def project(tmp_path: Path, runs_disk: Path) -> Iterator[Project]:
    root = tmp_path / "proj"
    root.mkdir()
    env = clean_env(tmp_path / "home", PI_WORKFLOWS_RUNS_DIR=str(runs_disk / "runs"),
                    PI_WORKFLOWS_FSYNC="never", PI_WORKFLOWS_POLL_INTERVAL_S="0.2",
                    PI_WORKFLOWS_RESTART_BACKOFF_S="0.1", PI_WORKFLOWS_LEASE_MS="3000",
                    PI_WORKFLOWS_RENEW_MS="500")
    proj = Project(root, env)
    try:
        yield proj
    finally:
        proj.cleanup()


def _quiet(text: str) -> None:
    assert "Traceback" not in text and "Errno 28" not in text, text[-4000:]
    assert "crashed (status" not in text and "crash loop" not in text, text[-4000:]


def test_a_running_run_parks_disk_full_and_resumes_once_space_returns(
        project: Project, runs_disk: Path) -> None:
    project.write_workflow("held", HELD)
    host = project.start_host()
    run_id = project.detach("held")
    wait_for(lambda: (project.root / "hold.started").exists(), what="the held node to start",
             diag=lambda: project.diagnose([run_id]))
    filler = runs_disk / "filler"
    fill(filler)
    project.release()  # the node ends: its next trace line does not fit
    wait_for(lambda: project.row(run_id).error_code == "disk_full", 30,
             what="the run parked blocked with disk_full",
             diag=lambda: project.diagnose([run_id]))
    row = project.row(run_id)
    assert row.state == "parked" and "filesystem is full" in (row.error_message or ""), row
    # A second run is not started while the disk is full (it would only fail).
    second = project.detach("held")
    assert host.poll() is None, host.log_text()
    assert project.row(second).state == "queued"
    # A host (re)started while the disk is still full serves too, as under a
    # service manager after a crash: no crash loop of hosts.
    host.proc.kill()
    host.wait(10)
    host = project.start_host(log="host2.log")
    wait_for(lambda: "no new run is started" in host.log_text(), 20,
             what="the new host to find the disk full", diag=host.log_text)
    assert host.poll() is None and project.row(second).state == "queued"
    free(filler)
    for run in (run_id, second):
        wait_for(lambda run=run: project.row(run).state == "done", 40,
                 what="the run to complete after space came back",
                 diag=lambda: project.diagnose([run_id, second]))
        assert project.state(run)["status"] == "completed"
    assert host.poll() is None
    _quiet((project.root / "host.log").read_text())  # the first host's, killed meanwhile
    text = host.log_text()
    _quiet(text)
    assert "the runs directory has space again" in text
    events = [e["type"] for e in project.events(run_id)]
    assert events.count("node_finished") == 3 and events[-1] == "run_completed", events


def test_a_run_launched_while_full_spends_no_crash_budget_and_runs_after(
        project: Project, runs_disk: Path) -> None:
    project.write_workflow("quick", QUICK)
    host = project.start_host()
    filler = runs_disk / "filler"
    fill(filler)
    run_id = project.detach("quick")
    # The worker meets the full disk, says so in one line, and the host waits.
    wait_for(lambda: "disk_full" in host.log_text(), 30, what="the worker's disk-full line",
             diag=lambda: host.log_text())
    # Longer than three crash restarts take (about 2 s before the fix).
    wait_for(lambda: "next try in" in host.log_text(), 10, what="the host's backoff")
    assert project.row(run_id).state in ("queued", "parked"), project.row(run_id)
    assert host.poll() is None, host.log_text()
    free(filler)
    wait_for(lambda: project.row(run_id).state == "done", 40,
             what="the run to complete after space came back",
             diag=lambda: project.diagnose([run_id]))
    assert project.state(run_id)["status"] == "completed"
    text = host.log_text()
    _quiet(text)
    assert text.count("filesystem is full") <= 3, text  # one line each, not a flood


def test_a_terminal_run_on_a_full_disk_says_so_in_one_line_and_a_host_finishes_it(
        project: Project, runs_disk: Path) -> None:
    project.write_workflow("quick", QUICK)
    filler = runs_disk / "filler"
    fill(filler)
    done = project.cli("run", "quick", check=False)  # attached, no host: its own worker
    out = done.stdout + done.stderr
    assert "Traceback" not in out and "Errno 28" not in out, out
    assert "disk_full: the runs directory's filesystem is full" in out, out
    [row] = project.store().list_runs()
    assert row.state in ("queued", "parked") and row.error_code in (None, "disk_full"), row
    assert done.returncode == 4, out  # not failed: left for a host, as a park is
    free(filler)
    host = project.start_host()
    wait_for(lambda: project.row(row.run_id).state == "done", 40,
             what="a host to finish the run once there is space",
             diag=lambda: project.diagnose([row.run_id]))
    _quiet(host.log_text())
