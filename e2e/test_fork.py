"""Fork drills through a live host and the CLI: from a failed shell node, from an
indeterminate effect left by a `kill -9`, a changed workflow file, the links in views."""

from __future__ import annotations

import hashlib
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from .harness import Project, wait_for

pytestmark = pytest.mark.slow  # real processes: an e2e drill

# prepare -> build -> ship. build reads config.txt and fails unless it says good.
DEPLOY = """
from pi_workflows import define_workflow, compute, shell, edge

def ship(ctx):
    with open(ctx.project_dir / "ship.count", "a") as fh:
        fh.write("x\\n")
    return {"prepared": ctx.outputs["prepare"]["stdout"].strip(),
            "built": ctx.outputs["build"]["stdout"].strip()}

workflow = define_workflow(
    start_at="prepare",
    nodes=[
        shell("prepare", "echo x >> prepare.count; echo prepared-$(wc -l < prepare.count)"),
        shell("build", "echo x >> build.count; grep -q good config.txt && echo built"),
        compute("ship", ship),
    ],
    edges=[edge("prepare", "build"), edge("build", "ship")],
)
"""

# quote -> charge -> receipt. charge is a non-idempotent effect that holds until released.
PAY = """
from pi_workflows import define_workflow, compute, shell, edge

workflow = define_workflow(
    start_at="quote",
    nodes=[
        shell("quote", "echo x >> quote.count; echo 42"),
        shell("charge", "echo x >> charge.count;"
                        " while [ ! -e release ]; do sleep 0.05; done; echo charged"),
        compute("receipt", lambda ctx: {"quote": ctx.outputs["quote"]["stdout"].strip(),
                                        "charge": ctx.outputs["charge"]["stdout"].strip()}),
    ],
    edges=[edge("quote", "charge"), edge("charge", "receipt")],
)
"""


def _hashes(bundle_dir: Path) -> dict[str, str]:
    """Every file of a bundle (the lock file too) by relative path -> sha256 of its bytes."""
    return {str(p.relative_to(bundle_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(bundle_dir.rglob("*")) if p.is_file()}


def _json(project: Project, *args: str) -> Any:
    return json.loads(project.cli(*args, "--json").stdout)


def _refused(project: Project, *args: str) -> str:
    proc = project.cli(*args, check=False)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pi-workflows: error: "), proc.stderr
    return lines[0]


@pytest.mark.timeout(120)
def test_fork_a_run_that_failed_at_a_shell_node(project: Project) -> None:
    project.write_workflow("deploy", DEPLOY)
    (project.root / "config.txt").write_text("bad\n")
    project.start_host()
    original = project.detach("deploy")
    wait_for(lambda: project.row(original).state == "failed", what="the run to fail at build")
    assert project.state(original)["error"]["code"] == "shell_nonzero_exit"
    bundle_dir = project.paths.runs_dir / original
    before = _hashes(bundle_dir)
    line = _refused(project, "fork", original, "--from", "deploy")
    assert "its nodes are: prepare, build, ship" in line

    (project.root / "config.txt").write_text("good\n")  # the cause, fixed
    out = _json(project, "fork", original, "--session", "s1")
    fork = out["runId"]
    assert out == {"runId": fork, "workflow": "deploy", "state": "queued",
                   "forkedFrom": original, "forkNode": "build", "carriedNodes": ["prepare"],
                   "carriedSteps": 1, "sourceMismatch": None, "forced": False,
                   "notifySession": "s1"}
    wait_for(lambda: project.row(fork).state == "done", what="the fork to complete",
             diag=lambda: project.diagnose([original, fork]))
    final = _json(project, "status", fork)
    assert final["runStatus"] == "completed"
    # prepare ran once, in the original: the fork shipped its carried output.
    assert final["finalOutput"] == {"prepared": "prepared-1", "built": "built"}
    assert project.lines("prepare.count") == ["x"]
    assert project.lines("build.count") == ["x", "x"] and project.lines("ship.count") == ["x"]
    assert (final["forkedFrom"], final["forkNode"], final["forks"]) == (original, "build", [])
    assert _json(project, "status", original)["forks"] == [fork]
    listed = {r["runId"]: r for r in _json(project, "list")["runs"]}
    assert listed[original]["forks"] == [fork] and listed[fork]["forkedFrom"] == original
    human = project.cli("status", original).stdout
    assert f"forked as {fork}" in human
    assert f"fork of {original} from build" in project.cli("status", fork).stdout
    assert _json(project, "status", "--session", "s1")["run"]["runId"] == fork
    events = project.events(fork)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [e["type"] for e in events][:2] == ["run_started", "run_resumed"]
    assert _hashes(bundle_dir) == before  # the original bundle, byte for byte


@pytest.mark.timeout(150)
def test_fork_re_attempts_an_indeterminate_effect(project: Project) -> None:
    project.write_workflow("pay", PAY)
    project.start_host()
    original = project.detach("pay")
    wait_for(lambda: project.lines("charge.count"), what="the charge effect to start")
    assert "is running" in _refused(project, "fork", original, "--from", "quote")
    worker = next(p["pid"] for p in project.state_processes(original) if p["role"] == "worker")
    os.kill(worker, signal.SIGKILL)  # mid-effect: nobody knows whether it was applied
    wait_for(lambda: project.row(original).state == "failed", timeout=60,
             what="the resumed run to fail on its indeterminate effect",
             diag=lambda: project.diagnose([original]))
    status = _json(project, "status", original)
    assert status["errorCode"] == "effect_indeterminate"
    with project.store() as store:
        effects = store.list_effects(original)
    assert [(e.node_id, e.state) for e in effects if e.node_id == "charge"] == [
        ("charge", "indeterminate")]
    bundle_dir = project.paths.runs_dir / original
    before = _hashes(bundle_dir)

    # The workflow file changes: a fork needs --force, and the change is recorded.
    path = project.root / ".pi" / "workflows" / "pay.workflow.py"
    path.write_text(path.read_text() + "\n# reviewed after the outage\n")
    runs_before = len(_json(project, "list")["runs"])
    assert "--force" in _refused(project, "fork", original)
    assert len(_json(project, "list")["runs"]) == runs_before  # nothing was queued
    project.release()  # the charge can complete now
    forced = project.cli("fork", original, "--force", "--json")
    assert "the workflow file changed" in forced.stderr
    out = json.loads(forced.stdout)
    fork = out["runId"]
    assert out["forkNode"] == "charge" and out["carriedNodes"] == ["quote"]
    assert out["forced"] is True
    assert out["sourceMismatch"]["actualSha256"] != out["sourceMismatch"]["expectedSha256"]
    wait_for(lambda: project.row(fork).state == "done", timeout=60,
             what="the fork to complete", diag=lambda: project.diagnose([original, fork]))
    final = _json(project, "status", fork)
    assert final["finalOutput"] == {"quote": "42", "charge": "charged"}
    # Asserted by the fork: the effect was attempted again; quote was not.
    assert project.lines("charge.count") == ["x", "x"] and project.lines("quote.count") == ["x"]
    started = project.events(fork)[0]["payload"]
    assert started["forced"] is True and started["sourceMismatch"] == out["sourceMismatch"]
    with project.store() as store:
        assert [e.state for e in store.list_effects(fork) if e.node_id == "charge"] == [
            "applied"]
        assert [e.state for e in store.list_effects(original) if e.node_id == "charge"] == [
            "indeterminate"]
    assert _hashes(bundle_dir) == before
