"""The resume protocol: dropped lines, the terminal event, park mid-node, refusals, pinning."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from pi_workflows import compute, define_workflow
from pi_workflows.protocol import bundle as bundle_mod
from pi_workflows.protocol import bundlewriter as writer_mod
from pi_workflows.protocol.bundlewriter import BundleWriter
from pi_workflows.protocol.definitions.discovery import load_workflow_file
from pi_workflows.protocol.store import Store
from pi_workflows.worker.control import Control
from pi_workflows.worker.engine import Engine, ResumeRefused, SourceChanged

from tests.helpers.engine import (
    GATES,
    Crash,
    Direct,
    Harness,
    assert_well_formed,
    bundle_bytes,
    crash_on,
    file_lines,
    types_of,
)

pytestmark = pytest.mark.timeout(60)

THREE = """
def step(name):
    def fn(ctx):
        with open(ctx.project_dir / (name + ".log"), "a") as fh:
            fh.write(ctx.attempt_id + "\\n")
        gate = h.GATES.get("hold_" + name)
        if gate is not None and not gate.is_set():
            gate.set()  # only the first attempt waits
            h.GATES["in_" + name].set()
            ctx.cancel.wait(30)
        return {"node": name, "total": sum(o["total"] for o in ctx.outputs.values()) + 1}
    return fn

workflow = define_workflow(
    start_at="a",
    nodes=[compute(n, step(n)) for n in "abc"],
    edges=[edge("a", "b"), edge("b", "c")],
)
"""
FINAL = {"node": "c", "total": 4}


def _logs(h: Harness) -> dict[str, list[str]]:
    return {n: file_lines(h.project / f"{n}.log") for n in "abc"}


def _since_resume(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    start = max(i for i, e in enumerate(events) if e["type"] == "run_resumed")
    return events[start:]


def test_a_line_appended_but_not_projected_is_dropped_and_its_node_reruns(h: Harness) -> None:
    h.write("three", THREE)
    run_id = h.launch("three")
    # The process dies after b's node_finished line is written, before its
    # projection write (a journal line or a state.json replace).
    writer_cls = writer_mod.BundleWriter
    real_write = writer_cls._write_state_and_manifest
    armed = {"on": True}

    def dying_write(self: Any, state: Any, **kwargs: Any) -> None:
        if armed["on"] and state.get("lastNode") == "b":
            armed["on"] = False
            raise Crash("between the trace line and the projection")
        real_write(self, state, **kwargs)

    writer_cls._write_state_and_manifest = dying_write  # type: ignore[method-assign]
    try:
        with pytest.raises(Crash):
            h.execute(run_id)
    finally:
        writer_cls._write_state_and_manifest = real_write  # type: ignore[method-assign]
    bundle = h.bundle(run_id)
    raw_trace = bundle.trace_path.read_bytes()
    orphan = raw_trace.splitlines()[-1]
    assert b'"node_finished"' in orphan and b'"nodeId":"b"' in orphan
    assert bundle.raw_state()["traceSeq"] == len(raw_trace.splitlines()) - 1

    assert h.after_crash(run_id).outcome == "completed"
    events = assert_well_formed(bundle)
    assert orphan not in bundle.trace_path.read_bytes()
    resumed = _since_resume(events)
    assert resumed[0]["payload"]["droppedTraceLines"] == 1
    assert resumed[0]["payload"]["resumePoint"] == "b"
    assert [e["nodeId"] for e in resumed if e["type"] == "node_started"] == ["b", "c"]
    logs = _logs(h)
    assert (len(logs["a"]), len(logs["b"]), len(logs["c"])) == (1, 2, 1)
    assert h.state(run_id)["finalOutput"] == FINAL
    assert h.state(run_id)["steps"] == 3
    assert h.row(run_id).state == "done"


def test_a_crash_after_the_last_node_writes_only_the_terminal_event(h: Harness) -> None:
    h.write("three", THREE)
    run_id = h.launch("three")
    with pytest.raises(Crash):
        h.execute(run_id, engine_hook=lambda e: crash_on(e, "run_completed"))
    bundle = h.bundle(run_id)
    before = assert_well_formed(bundle)
    assert before[-1]["type"] == "node_finished" and before[-1]["nodeId"] == "c"
    assert h.after_crash(run_id).outcome == "completed"
    events = assert_well_formed(bundle)
    assert events[:len(before)] == before
    assert types_of(events[len(before):]) == ["run_resumed", "run_completed"]
    assert events[-1]["payload"]["finalOutput"] == FINAL
    assert all(len(lines) == 1 for lines in _logs(h).values())
    assert h.row(run_id).state == "done"


def test_park_mid_node_then_resume_reruns_only_that_node(h: Harness) -> None:
    h.write("three", THREE)
    GATES.update(hold_b=threading.Event(), in_b=threading.Event())
    run_id = h.launch("three")
    control = Control()

    def park_when_b_runs() -> None:
        if GATES["in_b"].wait(30):
            control.request_park()

    helper = threading.Thread(target=park_when_b_runs)
    helper.start()
    out = h.execute(run_id, control=control)
    helper.join()
    assert out.outcome == "parked"
    assert h.row(run_id).state == "parked"
    bundle = h.bundle(run_id)
    parked_events = assert_well_formed(bundle)
    assert parked_events[-1]["type"] == "node_started" and parked_events[-1]["nodeId"] == "b"
    first_attempt = parked_events[-1]["attemptId"]
    state = bundle.state()
    assert (state["status"], state["currentNode"], state["currentAttempt"]) == (
        "running", "b", first_attempt)
    assert bundle.manifest()["status"] == "running"

    assert h.execute(run_id).outcome == "completed"
    events = assert_well_formed(bundle)
    assert events[:len(parked_events)] == parked_events
    resumed = events[len(parked_events):]
    assert resumed[0]["type"] == "run_resumed"
    assert resumed[0]["payload"]["resumePoint"] == "b"
    assert resumed[0]["payload"]["interruptedAttempt"] == first_attempt
    assert resumed[0]["payload"]["boundary"] is True
    starts = [e for e in resumed if e["type"] == "node_started"]
    assert [e["nodeId"] for e in starts] == ["b", "c"]
    assert starts[0]["payload"]["rerun"] is True
    assert starts[0]["attemptId"] != first_attempt
    logs = _logs(h)
    assert logs["a"] == [parked_events[2]["attemptId"]]
    assert logs["b"] == [first_attempt, starts[0]["attemptId"]]
    assert len(logs["c"]) == 1
    final = h.state(run_id)
    assert final["steps"] == 3  # the rerun does not count as a new step
    assert final["finalOutput"] == FINAL
    assert h.row(run_id).state == "done"


WAIT = """
workflow = define_workflow(
    start_at="a",
    nodes=[compute("a", lambda ctx: {"x": 1}), checkpoint("ask", summary="ok?")],
    edges=[edge("a", "ask")],
)
"""
FAILS = """
def boom(ctx):
    raise RuntimeError("broken")

workflow = define_workflow(start_at="a", nodes=[compute("a", boom)])
"""


@pytest.mark.parametrize(("body", "status"), [
    (THREE, "completed"), (WAIT, "waiting"), (FAILS, "failed")])
def test_resume_of_a_settled_bundle_is_refused_and_changes_nothing(
        h: Harness, body: str, status: str) -> None:
    h.write("settled", body)
    run_id = h.launch("settled")
    h.execute(run_id)
    bundle = h.bundle(run_id)
    assert bundle.state()["status"] == status
    # Even a stray tail is left alone: a settled bundle is never repaired.
    with bundle.trace_path.open("ab") as fh:
        fh.write(b'{"seq": 99, "type": "torn')
    before = bundle_bytes(bundle)
    loaded = load_workflow_file(h.workflows / "settled.workflow.py")
    writer = BundleWriter(bundle, h.store, _reclaim_settled(h, run_id), fsync="never")
    engine = Engine(loaded.workflow, writer, h.store, project_dir=h.project)
    with pytest.raises(ResumeRefused) as err:
        engine.reopen(source_sha256=loaded.source.sha256, digest=loaded.digest)
    assert err.value.code == "resume_refused"
    assert bundle_bytes(bundle) == before


def _reclaim_settled(h: Harness, run_id: str) -> str:
    """A live claim on a run whose bundle already settled (the row forced back to parked)."""
    conn = sqlite3.connect(h.store_path)
    try:
        conn.execute("UPDATE workflow_run_queue SET state = 'parked', claim_token = NULL,"
                     " runner_id = NULL, lease_expires_at = NULL WHERE run_id = ?", (run_id,))
        conn.commit()
    finally:
        conn.close()
    claim = h.store.claim_by_id(run_id, "runner-x")
    h.store.mark_running(run_id, claim.token)
    return claim.token


@pytest.mark.parametrize(("body", "status", "queue", "code"), [
    (THREE, "completed", "done", None),
    (WAIT, "waiting", "done", None),
    (FAILS, "failed", "failed", "node_error"),
])
def test_a_claim_on_a_settled_bundle_brings_the_queue_in_line(
        h: Harness, body: str, status: str, queue: str, code: str | None) -> None:
    """The owner died after the terminal event, before the queue heard of it."""
    h.write("settled", body)
    run_id = h.launch("settled")
    real = {"finish": h.store.finish, "fail": h.store.fail}

    def dies(*args: Any, **kwargs: Any) -> None:
        raise Crash("before the queue transition")

    h.store.finish = dies  # type: ignore[method-assign]
    h.store.fail = dies  # type: ignore[method-assign]
    try:
        with pytest.raises(Crash):
            h.execute(run_id)
    finally:
        h.store.finish, h.store.fail = real["finish"], real["fail"]  # type: ignore[method-assign]
    assert h.row(run_id).state == "running"
    before = bundle_bytes(h.bundle(run_id))
    out = h.after_crash(run_id)
    assert (out.outcome, out.error_code) == (status, code)
    row = h.row(run_id)
    assert (row.state, row.error_code) == (queue, code)
    assert bundle_bytes(h.bundle(run_id)) == before


# ---- source pinning -------------------------------------------------------------


def _parked_at_start(h: Harness) -> str:
    h.write("three", THREE)
    run_id = h.launch("three")
    control = Control()
    control.request_park()
    assert h.execute(run_id, control=control).outcome == "parked"
    return run_id


def test_an_edited_workflow_file_refuses_the_resume(h: Harness) -> None:
    run_id = _parked_at_start(h)
    path = h.workflows / "three.workflow.py"
    path.write_text(path.read_text() + "\n# edited after the run started\n")
    before = bundle_bytes(h.bundle(run_id))
    out = h.execute(run_id)
    assert (out.outcome, out.error_code) == ("parked", "source_changed")
    row = h.row(run_id)
    # Parked and blocked, waiting for a person: no runner claims it on its own.
    assert (row.state, row.error_code) == ("parked", "source_changed")
    assert h.store.claim_next("someone") is None
    assert bundle_bytes(h.bundle(run_id)) == before
    assert _logs(h) == {"a": [], "b": [], "c": []}


def test_the_engine_raises_source_changed_on_another_digest(tmp_path: Path) -> None:
    wf = define_workflow(name="pin", start_at="a", nodes=[compute("a", lambda ctx: 1)])
    other = define_workflow(name="pin", start_at="b", nodes=[compute("b", lambda ctx: 2)])
    with Store(tmp_path / "s.sqlite3") as store:
        direct = Direct(store, tmp_path / "runs", "20260101T000000Z-pin-00000001", wf, tmp_path)
        direct.enqueue()
        control = Control()
        control.request_park()
        assert direct.start(control=control).run() == "parked"
        changed = Direct(store, direct.runs, direct.run_id, other, tmp_path, direct.token)
        before = bundle_bytes(changed.engine().writer.bundle)
        with pytest.raises(SourceChanged) as err:
            changed.resume()
        assert err.value.code == "source_changed"
        assert bundle_bytes(changed.engine().writer.bundle) == before


def test_a_forced_resume_records_the_mismatch(h: Harness) -> None:
    run_id = _parked_at_start(h)
    path = h.workflows / "three.workflow.py"
    old_sha = h.row(run_id).source_sha256
    path.write_text(path.read_text() + "\n# edited after the run started\n")
    out = h.execute(run_id, force=True)
    assert out.outcome == "completed"
    events = assert_well_formed(h.bundle(run_id))
    resumed = [e for e in events if e["type"] == "run_resumed"]
    assert len(resumed) == 1
    mismatch = resumed[0]["payload"]["sourceMismatch"]
    assert mismatch["expectedSha256"] == old_sha
    assert mismatch["actualSha256"] != old_sha
    assert resumed[0]["payload"]["forced"] is True
    assert h.state(run_id)["finalOutput"] == FINAL


def test_an_unforced_resume_of_an_unchanged_source_records_no_mismatch(h: Harness) -> None:
    run_id = _parked_at_start(h)
    assert h.execute(run_id).outcome == "completed"
    resumed = [e for e in assert_well_formed(h.bundle(run_id)) if e["type"] == "run_resumed"]
    assert [r["payload"]["sourceMismatch"] for r in resumed] == [None]
    assert [r["payload"]["forced"] for r in resumed] == [False]


def test_a_file_edited_between_enqueue_and_first_claim_fails_the_launch(h: Harness) -> None:
    h.write("three", THREE)
    run_id = h.launch("three")
    path = h.workflows / "three.workflow.py"
    path.write_text(path.read_text() + "\n# edited while queued\n")
    out = h.execute(run_id)
    assert (out.outcome, out.error_code) == ("failed", "source_changed")
    row = h.row(run_id)
    assert (row.state, row.error_code, row.has_private_input) == ("failed", "source_changed",
                                                                  False)
    assert not h.bundle(run_id).exists()


# A run's atomic file replacements: workflow.json, manifest.json, state.json
# at creation; state.json and manifest.json when it settles (every step in
# between is a journal line).
RUN_REPLACEMENTS = 5


def _replacements(monkeypatch: pytest.MonkeyPatch, crash_at: int = 0) -> list[str]:
    """The names of the files a run replaces atomically, in order; ``crash_at``: die
    (``Crash``) instead of the n-th replacement."""
    real_write = writer_mod.write_json_atomic
    calls: list[str] = []

    def write(path: Path, value: Any, *, sync: bool, sync_dir: bool = True) -> None:
        calls.append(path.name)
        if len(calls) == crash_at:
            raise Crash(f"while writing {path.name}")
        real_write(path, value, sync=sync, sync_dir=sync_dir)

    monkeypatch.setattr(writer_mod, "write_json_atomic", write)
    return calls


def test_the_crash_points_below_are_every_replacement_of_a_run(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    h.write("three", THREE)
    run_id = h.launch("three")
    calls = _replacements(monkeypatch)
    assert h.execute(run_id).outcome == "completed"
    assert len(calls) == RUN_REPLACEMENTS, calls


@pytest.mark.parametrize("crash_at", range(1, RUN_REPLACEMENTS + 1))
def test_a_crash_at_any_write_of_bundle_creation_is_recoverable(
        h: Harness, monkeypatch: pytest.MonkeyPatch, crash_at: int) -> None:
    """Die at the n-th atomic file replacement of a new run (creation, and the
    settling write whose manifest lags its projection): the next claim finishes it."""
    h.write("three", THREE)
    run_id = h.launch("three")
    with monkeypatch.context() as dying:  # the next claim writes for real
        calls = _replacements(dying, crash_at)
        with pytest.raises(Crash):
            h.execute(run_id)
    out = h.after_crash(run_id)
    assert out.outcome == "completed", (calls, out)
    bundle = h.bundle(run_id)
    events = assert_well_formed(bundle)
    assert types_of(events).count("run_started") == 1
    assert bundle.manifest()["status"] == "completed"
    assert h.state(run_id)["finalOutput"] == FINAL
    assert h.row(run_id).state == "done"


def test_a_workflow_that_no_longer_loads_fails_in_the_bundle_too(h: Harness) -> None:
    run_id = _parked_at_start(h)
    (h.workflows / "three.workflow.py").write_text("this is not python(\n")
    out = h.execute(run_id)
    assert (out.outcome, out.error_code) == ("failed", "workflow_invalid")
    assert h.row(run_id).state == "failed"
    state = h.bundle(run_id).state()
    assert state["status"] == "failed" and state["error"]["code"] == "workflow_invalid"
    assert [e["type"] for e in h.bundle(run_id).scan().events][-1] == "run_failed"


def test_a_bundle_laid_out_behind_our_back_is_resumed_not_failed(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """create() is decided outside the fence; if the bundle appeared meanwhile, resume it."""
    run_id = _parked_at_start(h)
    real = bundle_mod.Bundle.exists
    calls = {"n": 0}

    def first_says_no(self: Any) -> bool:
        calls["n"] += 1
        return False if calls["n"] == 1 else real(self)

    monkeypatch.setattr(bundle_mod.Bundle, "exists", first_says_no)
    out = h.execute(run_id)
    assert out.outcome == "completed"
    events = assert_well_formed(h.bundle(run_id))
    assert [e["type"] for e in events].count("run_started") == 1
    assert any(e["type"] == "run_resumed" for e in events)
