"""Source pinning covers included files: the manifest pins each one, and a changed child
refuses a resume and a queued launch exactly as a changed parent does."""

from __future__ import annotations

import hashlib
import os
import textwrap
from pathlib import Path

import pytest
from pi_workflows.protocol.settle import repin_source
from pi_workflows.supervisor.session.fork import fork_run
from pi_workflows.worker.control import Control

from tests.helpers.engine import HEADER, Harness, assert_well_formed, bundle_bytes

pytestmark = pytest.mark.timeout(60)

CHILD = """
workflow = define_workflow(
    start_at="s", nodes=[compute("s", lambda ctx: {"v": ctx.input["v"] + 1})],
    exits={"done": "s"})
"""
PARENT = """
from pi_workflows import include

workflow = define_workflow(
    start_at="a",
    nodes=[compute("a", lambda ctx: {"v": 1}),
           include("parts/step.workflow.py", input=lambda ctx: ctx.outputs["a"], as_="step"),
           compute("end", lambda ctx: ctx.outputs["step.done"])],
    edges=[edge("a", "step"), edge("step.done", "end")],
)
"""
FINAL = {"exit": "done", "output": {"v": 2}}


def _child(h: Harness) -> Path:
    path = h.workflows / "parts" / "step.workflow.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(HEADER + textwrap.dedent(CHILD).lstrip())
    return path


def _parked_at_start(h: Harness) -> tuple[str, Path]:
    child = _child(h)
    h.write("top", PARENT)
    run_id = h.launch("top")
    control = Control()
    control.request_park()
    assert h.execute(run_id, control=control).outcome == "parked"
    return run_id, child


def test_the_manifest_pins_every_included_file(h: Harness) -> None:
    child = _child(h)
    h.write("top", PARENT)
    run_id = h.launch("top")
    assert h.execute(run_id).outcome == "completed"
    assert h.state(run_id)["finalOutput"] == FINAL
    manifest = h.bundle(run_id).manifest()
    assert manifest["source"]["path"] == os.path.realpath(h.workflows / "top.workflow.py")
    assert manifest["includes"] == [{
        "mount": "step", "workflow": "step", "path": os.path.realpath(child),
        "sha256": hashlib.sha256(child.read_bytes()).hexdigest()}]


def test_a_changed_child_refuses_the_resume(h: Harness) -> None:
    run_id, child = _parked_at_start(h)
    child.write_text(child.read_text() + "\n# edited after the run started\n")
    before = bundle_bytes(h.bundle(run_id))
    out = h.execute(run_id)
    assert (out.outcome, out.error_code) == ("parked", "source_changed")
    row = h.row(run_id)
    assert (row.state, row.error_code) == ("parked", "source_changed")
    assert f"the included workflow file {os.path.realpath(child)}" in (row.error_message or "")
    assert h.store.claim_next("someone") is None
    assert bundle_bytes(h.bundle(run_id)) == before


def test_resume_force_accepts_the_changed_child(h: Harness) -> None:
    run_id, child = _parked_at_start(h)
    old = hashlib.sha256(child.read_bytes()).hexdigest()
    child.write_text(child.read_text() + "\n# edited after the run started\n")
    assert h.execute(run_id).error_code == "source_changed"
    repin_source(h.store, h.runs, run_id, fsync="never")  # what `resume --force` does
    manifest = h.bundle(run_id).manifest()
    assert manifest["includes"][0]["sha256"] == hashlib.sha256(child.read_bytes()).hexdigest()
    assert h.execute(run_id).outcome == "completed"
    assert h.state(run_id)["finalOutput"] == FINAL
    repinned = [e for e in assert_well_formed(h.bundle(run_id))
                if e["type"] == "source_repinned"]
    assert len(repinned) == 1 and repinned[0]["payload"]["sourceMismatch"][
        "expectedDigest"] != repinned[0]["payload"]["sourceMismatch"]["actualDigest"]
    assert old != manifest["includes"][0]["sha256"]


def test_a_forced_resume_records_the_changed_child(h: Harness) -> None:
    run_id, child = _parked_at_start(h)
    child.write_text(child.read_text() + "\n# edited after the run started\n")
    assert h.execute(run_id, force=True).outcome == "completed"
    [resumed] = [e for e in assert_well_formed(h.bundle(run_id)) if e["type"] == "run_resumed"]
    mismatch = resumed["payload"]["sourceMismatch"]
    assert [c["mount"] for c in mismatch["includes"]] == ["step"]
    assert mismatch["expectedSha256"] == mismatch["actualSha256"]  # the parent is unchanged


def test_a_child_changed_while_queued_fails_the_launch(h: Harness) -> None:
    child = _child(h)
    h.write("top", PARENT)
    run_id = h.launch("top")
    child.write_text(child.read_text() + "\n# edited while queued\n")
    out = h.execute(run_id)
    assert (out.outcome, out.error_code) == ("failed", "source_changed")
    assert not h.bundle(run_id).exists()


def test_a_fork_inside_a_mount_pins_the_included_files_too(h: Harness) -> None:
    _child(h)
    h.write("top", PARENT)
    run_id = h.launch("top")
    assert h.execute(run_id).outcome == "completed"
    _, row = fork_run(h.store, h.runs, h.row(run_id), "step/s", fsync="never")
    assert h.bundle(row.run_id).manifest()["includes"] == h.bundle(run_id).manifest()["includes"]
    out = h.execute(row.run_id)
    assert (out.outcome, out.error_code) == ("completed", None)
    assert h.state(row.run_id)["finalOutput"] == FINAL
