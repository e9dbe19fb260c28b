"""A worker killed with ``kill -9`` in an agent step leaves its bridge socket's
directory (``pwb-*``) and its Pi's ``TMPDIR`` (``pi-workflows-pi-*``) behind; the host's
sweep removes them (their owner file names a dead process), while a live run's are kept."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from .agents_kit import STEP_S, Turn, roles, submit, use_brain, wait_queue
from .harness import Project, wait_for
from .scripted_model import Reply, Stall, ToolCalls, call

pytestmark = pytest.mark.slow  # real host, workers and Pi

AGENT = """
from pi_workflows import define_workflow, agent

workflow = define_workflow(start_at="{node}", nodes=[agent("{node}", "Do the {node} step")])
"""


CURRENT = re.compile(r'"attempt": "([^"]+)", "output"')  # the contract's submit line


@pytest.fixture
def tmpdir_root() -> Iterator[Path]:
    # Short: the bridge socket's path must fit sun_path; private to this test, so only
    # its workers' directories are seen.
    root = Path(tempfile.mkdtemp(prefix="pwt-", dir="/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def dirs_of_pi(project: Project, run_id: str) -> tuple[int, list[Path]] | None:
    """(worker pid, [Pi's TMPDIR, the bridge socket's directory]) of the run's latest Pi,
    read from that Pi's own environment, once both exist."""
    workers, pis = roles(project, run_id, "worker"), roles(project, run_id, "pi")
    if not workers or not pis:
        return None
    try:
        env = psutil.Process(pis[-1]["pid"]).environ()
    except psutil.Error:
        return None
    if "TMPDIR" not in env or "PI_WORKFLOWS_BRIDGE" not in env:
        return None
    dirs = [Path(env["TMPDIR"]), Path(env["PI_WORKFLOWS_BRIDGE"]).parent]
    return (workers[-1]["pid"], dirs) if all(d.is_dir() for d in dirs) else None


def leftovers(root: Path) -> list[str]:
    return [p.name for p in root.iterdir() if p.name.startswith(("pwb-", "pi-workflows-pi-"))]


@pytest.mark.timeout(240)
def test_kill9_of_an_agent_worker_leaves_no_temp_dirs_and_a_live_run_keeps_its_own(
        project: Project, tmp_path: Path, tmpdir_root: Path) -> None:
    project.env["TMPDIR"] = str(tmpdir_root)
    project.write_workflow("build", AGENT.format(node="build"))
    project.write_workflow("other", AGENT.format(node="other"))

    stall = Stall("Thinking")

    def decide(turn: Turn) -> Reply | None:
        if turn.node == "build":
            if len(brain.of("build")) == 1:
                # The first attempt's model reply is still streaming when the worker dies.
                return stall
            # Killed in its very first reply, the run has no conversation to continue: the
            # retry's prompt is the first message; its contract names the attempt that counts.
            current = CURRENT.findall("\n".join(turn.request.texts("user")))[-1]
            return ToolCalls(submit(current, "built"))
        return ToolCalls(call("bash", {"command": "sleep 300"})) if turn.index == 0 else None

    with use_brain(project, tmp_path, decide) as brain:
        host = project.start_host("--concurrency", "2")
        victim = project.detach("build")
        live = project.detach("other")
        stall.wait_reached(STEP_S)
        killed, gone_dirs = wait_for(lambda: dirs_of_pi(project, victim), timeout=STEP_S,
                                     what="the build step's Pi and its two temp dirs",
                                     diag=lambda: project.diagnose([victim]) + brain.describe())
        _, kept_dirs = wait_for(lambda: dirs_of_pi(project, live), timeout=STEP_S,
                                what="the other step's Pi and its two temp dirs",
                                diag=lambda: project.diagnose([live]) + brain.describe())
        assert all(d.parent == tmpdir_root for d in gone_dirs + kept_dirs)
        os.kill(killed, signal.SIGKILL)
        assert stall.wait_done(STEP_S) == "disconnected"  # its Pi went with it

        # The host restarts the crashed worker; the resumed step completes the run.
        wait_queue(project, victim, "done", brain=brain)
        wait_for(lambda: not any(d.exists() for d in gone_dirs), timeout=STEP_S,
                 what=f"the killed worker's temp dirs removed: {gone_dirs}",
                 diag=host.log_text)
        # The live run's worker and its directories are untouched.
        assert project.row(live).state == "running"
        assert all(d.is_dir() for d in kept_dirs)
        # The restarted worker removes its own when it exits: then only the live run's remain.
        wait_for(lambda: len(leftovers(tmpdir_root)) == 2, timeout=STEP_S,
                 what="only the live run's two temp dirs left",
                 diag=lambda: str(leftovers(tmpdir_root)))
        project.stop_host(host)
    # A worker that stops normally removes its own.
    assert not leftovers(tmpdir_root)


MAKE = ("import sys; from pi_workflows.protocol.tempdirs import owned_tempdir;"
        " print(owned_tempdir(sys.argv[1]))")


@pytest.mark.timeout(120)
def test_gc_removes_a_dead_workers_temp_dirs_and_keeps_a_live_ones(
        project: Project, tmpdir_root: Path) -> None:
    project.env["TMPDIR"] = str(tmpdir_root)
    project.stop_host(project.start_host())  # the store exists; no host runs (it sweeps too)
    assert project.paths.store_file.exists()
    made = [subprocess.run([sys.executable, "-c", MAKE, prefix], env=project.env, check=True,
                           capture_output=True, text=True).stdout.strip()
            for prefix in ("pwb-", "pi-workflows-pi-")]  # their owner exited: dead
    live = subprocess.Popen([sys.executable, "-c", MAKE + "; import time; time.sleep(60)",
                             "pwb-"], env=project.env, stdout=subprocess.PIPE, text=True)
    try:
        assert live.stdout is not None
        kept = Path(live.stdout.readline().strip())
        report = json.loads(project.cli("gc", "--older-than", "30d", "--json").stdout)
        assert report["tempDirsRemoved"] == 2
        assert not any(Path(p).exists() for p in made)
        assert kept.is_dir()
    finally:
        live.kill()
        live.wait(10)
