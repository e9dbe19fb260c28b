"""`pi-workflows doctor`: real Pi, real store, real permissions and a real host."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from .harness import Project

pytestmark = pytest.mark.slow  # real processes: an e2e drill

QUICK = """
from pi_workflows import define_workflow, compute
workflow = define_workflow(start_at="one", nodes=[compute("one", lambda ctx: {"ok": 1})])
"""
NAMES = ["python", "pi", "store", "permissions", "host", "disk"]


def _doctor(project: Project) -> tuple[int, dict[str, Any], dict[str, dict[str, Any]]]:
    proc = project.cli("doctor", "--json", check=False)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    out = json.loads(proc.stdout)
    return proc.returncode, out, {c["check"]: c for c in out["checks"]}


def _state(root: Path) -> list[tuple[str, int, int, int]]:
    """Every path with its mode, size and mtime: what doctor must leave as it was."""
    return sorted((str(p), p.lstat().st_mode, p.lstat().st_size, p.lstat().st_mtime_ns)
                  for p in [root, *root.rglob("*")])


@pytest.mark.timeout(90)
def test_a_healthy_project_and_a_running_host(project: Project) -> None:
    code, out, checks = _doctor(project)  # before anything exists
    assert code == 0 and out["ok"] is True and [c["check"] for c in out["checks"]] == NAMES
    assert checks["store"]["level"] == "info" and "no store yet" in checks["store"]["message"]
    assert not project.paths.state_dir.exists()  # doctor created nothing
    project.write_workflow("quick", QUICK)
    project.cli("run", "quick")
    before = _state(project.paths.state_dir)
    code, out, checks = _doctor(project)
    assert code == 0, out
    assert _state(project.paths.state_dir) == before
    assert checks["pi"]["level"] == "ok" and re.match(r"pi \d+\.\d+", checks["pi"]["message"])
    store = checks["store"]
    assert store["level"] == "ok" and "pi-workflows.store.v2" in store["message"]
    assert checks["permissions"]["level"] == "ok" and checks["host"]["level"] == "info"
    assert all(set(c) == {"check", "level", "message", "paths"} for c in out["checks"])
    host = project.start_host()
    _, _, checks = _doctor(project)
    assert checks["host"]["level"] == "ok" and f"pid {host.pid}" in checks["host"]["message"]
    human = project.cli("doctor").stdout.splitlines()
    assert [line.split()[:2] for line in human][:3] == [["ok", "python"], ["ok", "pi"],
                                                        ["ok", "store"]]


@pytest.mark.timeout(90)
def test_loose_permissions_fail_and_name_each_path(project: Project) -> None:
    project.write_workflow("quick", QUICK)
    run = json.loads(project.cli("run", "quick", "--json").stdout)["runId"]
    state = project.paths.runs_dir / run / "state.json"
    os.chmod(project.paths.runs_dir, 0o755)
    os.chmod(state, 0o644)
    code, out, checks = _doctor(project)
    assert code == 1 and out["ok"] is False
    perm = checks["permissions"]
    assert perm["level"] == "fail"
    assert sorted(perm["paths"]) == sorted([str(project.paths.runs_dir), str(state)])
    assert f"{project.paths.runs_dir} (0755, want 0700)" in perm["message"]
    assert f"{state} (0644, want 0600)" in perm["message"]
    human = project.cli("doctor", check=False)
    assert human.returncode == 1
    line = next(x for x in human.stdout.splitlines() if x.startswith("FAIL"))
    assert "permissions" in line and str(project.paths.runs_dir) in line
    assert os.stat(project.paths.runs_dir).st_mode & 0o777 == 0o755  # reported, not fixed


@pytest.mark.timeout(90)
def test_pi_missing_or_broken_and_a_foreign_store_fail(project: Project, tmp_path: Path) -> None:
    project.env["PI_WORKFLOWS_PI_BIN"] = str(tmp_path / "nowhere" / "pi")
    code, _, checks = _doctor(project)
    assert code == 1 and checks["pi"]["level"] == "fail"
    assert "pi not found at" in checks["pi"]["message"]
    line = next(x for x in project.cli("doctor", check=False).stdout.splitlines()
                if x.startswith("FAIL"))
    assert line.split()[1] == "pi"
    project.env["PI_WORKFLOWS_PI_BIN"] = "/bin/false"
    code, _, checks = _doctor(project)
    assert code == 1 and "exited 1" in checks["pi"]["message"]
    del project.env["PI_WORKFLOWS_PI_BIN"]
    store = project.paths.store_file
    store.parent.mkdir(parents=True, mode=0o700)
    store.write_bytes(b"not a database at all, just some bytes" * 100)
    os.chmod(store, 0o600)
    code, _, checks = _doctor(project)
    assert code == 1 and checks["store"]["level"] == "fail"
    assert "incompatible" in checks["store"]["message"]
    assert checks["pi"]["level"] == "ok"
