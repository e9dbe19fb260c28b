"""`host --background` and `host --stop` with real processes, and titles that name the project.

Every background host is adopted by the project (killed by pid at clean-up
if a test leaves it running), so no process outlives a test.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import stat
from pathlib import Path

import psutil
import pytest
from pi_workflows.protocol.liveness import is_same_process
from pi_workflows.protocol.paths import project_key
from pi_workflows.protocol.wire import CONFIG_ENV
from pi_workflows.supervisor.host.background import find_host

from .harness import Project, read_json, wait_for
from .sessions_kit import cli_argv, pty_child
from .snippets import HOLD

pytestmark = pytest.mark.slow  # real processes: an e2e drill

FLOW = """
from pi_workflows import define_workflow, compute

workflow = define_workflow(start_at="a", nodes=[compute("a", lambda ctx: {"a": 1})])
"""
PIPELINE = HOLD + """
from pi_workflows import define_workflow, compute, edge

workflow = define_workflow(
    start_at="hold",
    nodes=[compute("hold", hold("hold")), compute("after", lambda ctx: {"ok": True})],
    edges=[edge("hold", "after")],
)
"""


def _title(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline()).strip()
    except psutil.Error:
        return ""


def _zygote_of(pid: int) -> psutil.Process | None:
    """The host's booted zygote (its title names it)."""
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(pid).children():
            if _title(child.pid).startswith("pi-workflows zygote "):
                return child
    return None


@pytest.mark.timeout(120)
def test_background_host_outlives_its_terminal_and_serves_runs(project: Project) -> None:
    project.write_workflow("flow", FLOW)
    out, done = project.root / "bg.json", project.root / "bg.done"
    command = shlex.join(cli_argv(project, "host", "--background", "--json"))
    # A terminal: a shell leading its own session on a pty starts the host, then waits.
    shell, master = pty_child(["bash", "-c", f"{command} > {out} && touch {done};"
                               " exec sleep 600"], project.env)
    try:
        wait_for(done.exists, 60, what="host --background to return")
        info = json.loads(out.read_text())
        pid = int(info["pid"])
        project.adopt(pid)
        start = psutil.Process(pid).create_time()
        log = project.paths.log_dir / "host.log"
        assert info["log"] == str(log) and stat.S_IMODE(log.stat().st_mode) == 0o600
        # It returned once that very host said ready.
        assert read_json(project.paths.host_lock)["pid"] == pid
        assert read_json(project.paths.host_lock)["ready"] is True
        # Detached: a session of its own, no terminal, its output in the log.
        assert os.getsid(pid) == pid != os.getsid(shell.pid)
        assert psutil.Process(pid).terminal() is None
        assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"
        assert os.readlink(f"/proc/{pid}/fd/1") == os.readlink(f"/proc/{pid}/fd/2") == str(log)
    finally:
        os.close(master)  # the terminal closes: SIGHUP to its session
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
        shell.wait(30)
    queued = project.cli("run", "flow", "--detach", "--json")
    assert "no host is running" not in queued.stderr
    run = json.loads(queued.stdout)["runId"]
    wait_for(lambda: project.row(run).state == "done", what="the background host ran it",
             diag=lambda: project.diagnose([run]))
    assert is_same_process(pid, start)  # the same host, after the hang-up and the kill
    assert f"(pid {pid})" in log.read_text()  # the log is that host's own output

    again = project.cli("host", "--background", check=False)
    assert again.returncode == 2 and again.stdout == ""
    assert again.stderr == (f"pi-workflows: error: a host is already running for this project"
                            f" (pid {pid}); stop it with `pi-workflows host --stop --project"
                            f" {project.root}`\n")  # named from outside the project
    stopped = project.cli("host", "--stop")
    assert f"stopped pid {pid}" in stopped.stdout
    assert not is_same_process(pid, start)


@pytest.mark.timeout(120)
def test_stop_drains_a_running_run_and_a_new_host_finishes_it(project: Project) -> None:
    project.write_workflow("pipeline", PIPELINE)
    info = project.background_host("--concurrency", "1", pi_args=("--model", "scripted/x"))
    pid = int(info["pid"])
    start = psutil.Process(pid).create_time()
    # `--concurrency` and the words after `--` reached the detached host.
    log = Path(info["log"])
    assert "concurrency 1" in log.read_text()
    zygote = wait_for(lambda: _zygote_of(pid), what="the host's zygote")
    assert json.loads(zygote.environ()[CONFIG_ENV])["pi_args"] == ["--model", "scripted/x"]

    run = project.detach("pipeline")
    wait_for(lambda: project.lines("hold.started"), what="the run holding",
             diag=lambda: project.diagnose([run]))
    stopped = project.cli("host", "--stop", "--json")
    assert json.loads(stopped.stdout) == {"stopped": True, "pid": pid}
    assert not is_same_process(pid, start)  # --stop returned after the host exited
    assert project.row(run).state == "parked"
    state = project.state(run)
    assert state["status"] == "running" and state["currentNode"] == "hold"
    assert read_json(project.paths.host_lock) == {}

    project.release()
    second = project.background_host()
    wait_for(lambda: project.row(run).state == "done", what="a new host finished the run",
             diag=lambda: project.diagnose([run]))
    assert project.state(run)["status"] == "completed"
    assert len(project.lines("hold.started")) == 2  # the held node ran again, once
    assert f"stopped pid {second['pid']}" in project.cli("host", "--stop").stdout

    none = project.cli("host", "--stop")
    assert none.stdout == "pi-workflows host: no host is running for this project\n"
    assert json.loads(project.cli("host", "--stop", "--json").stdout) == {"stopped": False,
                                                                           "pid": None}


@pytest.mark.timeout(120)
def test_a_background_start_that_fails_says_why_in_one_line(project: Project) -> None:
    paths = project.paths
    # Settings the host refuses: one line, exit 2, nothing started.
    renew = project.env["PI_WORKFLOWS_RENEW_MS"]
    project.env["PI_WORKFLOWS_RENEW_MS"] = "60000"  # more than half the lease
    refused = project.cli("host", "--background", check=False)
    project.env["PI_WORKFLOWS_RENEW_MS"] = renew
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("pi-workflows: error: ") and refused.stderr.count("\n") == 1
    assert "renew" in refused.stderr
    # A store the host refuses to open: the detached host exits, and the starting
    # command reports its reason and exit code (5: incompatible store) in one line.
    paths.store_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    paths.store_file.write_bytes(b"not a store at all" * 100)
    failed = project.cli("host", "--background", check=False)
    log = paths.log_dir / "host.log"
    assert failed.returncode == 5 and failed.stdout == "", failed.stderr
    assert failed.stderr.count("\n") == 1, failed.stderr
    assert failed.stderr.startswith("pi-workflows: error: the host did not start: the store ")
    assert "incompatible" in failed.stderr and failed.stderr.endswith(f"(log: {log})\n")
    assert "pi-workflows: error: the store " in log.read_text()  # the host's own line
    assert find_host(paths) is None
    paths.store_file.unlink()

    # Not ready within --timeout: said in one line, exit 1, the host left running.
    slow = project.cli("host", "--background", "--timeout", "0", check=False)
    assert slow.returncode == 1 and slow.stderr.count("\n") == 1, slow.stderr
    found = re.search(r"the host \(pid (\d+)\) is not ready after 0 s and is left running",
                      slow.stderr)
    assert found, slow.stderr
    pid = int(found.group(1))
    project.adopt(pid)
    wait_for(lambda: read_json(paths.host_lock).get("pid") == pid
             and read_json(paths.host_lock).get("ready"), what="the slow host to be ready")
    assert f"stopped pid {pid}" in project.cli("host", "--stop").stdout


@pytest.mark.timeout(120)
def test_hosts_and_workers_of_two_projects_named_alike_have_different_titles(
        project: Project, tmp_path: Path) -> None:
    root = tmp_path / "elsewhere" / "proj"
    root.mkdir(parents=True)
    other = Project(root, dict(project.env))  # the same home, another project "proj"
    try:
        titles = []
        for proj in (project, other):
            pid = int(proj.background_host()["pid"])
            key = project_key(proj.root)
            zygote = wait_for(lambda pid=pid: _zygote_of(pid), what="a zygote")
            assert _title(pid) == f"pi-workflows host {key} workers=0"
            assert _title(zygote.pid) == f"pi-workflows zygote {key}"
            titles.append(_title(pid))
        assert titles[0] != titles[1] and project.root.name == other.root.name == "proj"
    finally:
        other.cleanup()
