"""Real-process drill fixtures: a project, its environment, a host subprocess.

Every helper polls with a deadline; nothing sleeps to synchronise.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from pi_workflows.protocol.bundle import Bundle
from pi_workflows.protocol.settings import Paths, load_settings, resolve_paths
from pi_workflows.protocol.store import QueueRow, Store


def alive(pid: int) -> bool:
    """Running and not a zombie (a killed orphan may linger unreaped)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition",
             interval: float = 0.05, diag: Callable[[], str] | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            extra = f"\n{diag()}" if diag is not None else ""
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}{extra}")
        time.sleep(interval)


@dataclass
class Project:
    root: Path
    env: dict[str, str]
    hosts: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def paths(self) -> Paths:
        saved = dict(os.environ)
        os.environ.update(self.env)
        try:
            return resolve_paths(load_settings(), self.root)
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def write_workflow(self, name: str, body: str) -> Path:
        path = self.root / ".pi" / "workflows" / f"{name}.workflow.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body))
        return path

    def cli(self, *args: str, check: bool = True,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([sys.executable, "-m", "pi_workflows", *args, "--project",
                               str(self.root)], env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"{args} exited {proc.returncode}: {proc.stderr}")
        return proc

    def detach(self, name: str, payload: Any = None) -> str:
        args = ["run", name, "--detach", "--json"]
        if payload is not None:
            args += ["--input-json", json.dumps(payload)]
        return str(json.loads(self.cli(*args).stdout)["runId"])

    def start_host(self, *extra: str, log: str = "host.log") -> subprocess.Popen[bytes]:
        out = open(self.root / log, "ab")  # noqa: SIM115 - the host owns it while it runs
        host = subprocess.Popen([sys.executable, "-m", "pi_workflows", "host", "--project",
                                 str(self.root), *extra], env=self.env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.hosts.append(host)
        wait_for(lambda: b"took over" in (self.root / log).read_bytes() or host.poll() is not None,
                 what="host start-up")
        assert host.poll() is None, (self.root / log).read_text()
        return host

    def store(self) -> Store:
        return Store(self.paths.store_file)

    def row(self, run_id: str) -> QueueRow:
        with self.store() as store:
            row = store.get(run_id)
        assert row is not None
        return row

    def state(self, run_id: str) -> dict[str, Any]:
        bundle = Bundle(self.paths.runs_dir, run_id)
        return bundle.state() if bundle.exists() else {}

    def events(self, run_id: str) -> list[dict[str, Any]]:
        return Bundle(self.paths.runs_dir, run_id).scan().events

    def diagnose(self, runs: list[str]) -> str:
        lines = []
        for run_id in runs:
            row = self.row(run_id)
            lines.append(f"{run_id}: queue={row.state} runner={row.runner_id}"
                         f" state={self.state(run_id).get('status')}"
                         f" node={self.state(run_id).get('currentNode')}")
        for log in sorted(self.root.glob("*.log")):
            lines.append(f"--- {log.name}\n{log.read_text()[-3000:]}")
        logs = self.paths.log_dir / "pi-workflows.log"
        if logs.exists():
            lines.append("--- pi-workflows.log\n" + logs.read_text()[-4000:])
        return "\n".join(lines)

    def state_processes(self, run_id: str) -> list[dict[str, Any]]:
        return list(Bundle(self.paths.runs_dir, run_id).processes().get("processes", []))

    def lines(self, name: str) -> list[str]:
        path = self.root / name
        return path.read_text().splitlines() if path.exists() else []

    def release(self, name: str = "release") -> None:
        (self.root / name).write_text("go\n")


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    root = tmp_path / "proj"
    root.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PI_WORKFLOWS_")}
    env.update({
        "PI_WORKFLOWS_HOME": str(tmp_path / "home"),
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
    for host in proj.hosts:
        if host.poll() is None:
            os.killpg(host.pid, signal.SIGKILL)
            host.wait()
    # Workers and their children carry the marker; leave nothing behind.
    from pi_workflows.protocol.settings import project_key
    from pi_workflows.supervisor.reaper import find_orphans, kill_processes
    kill_processes(find_orphans(proj.paths.runs_dir, project_key(root), set()), timeout=5)


HOLD = """
def hold(name):
    # Block the node until the test creates the release file.
    def fn(ctx):
        import pathlib, time
        root = ctx.project_dir
        with open(root / f"{name}.started", "a") as fh:
            fh.write(ctx.attempt_id + "\\n")
        while not (root / "release").exists():
            if ctx.cancelled():
                raise RuntimeError("stopped")
            time.sleep(0.02)
        return {"held": name}
    return fn
"""
