"""Guarded effects across crashes, with real ``kill -9`` of the worker process."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest
from pi_workflows.protocol import artifacts as artifacts_mod
from pi_workflows.protocol.liveness import is_same_process
from pi_workflows.worker.runner import RunOutcome, execute_claim

from tests.helpers import children, processes
from tests.helpers.engine import Crash, Harness, assert_well_formed, crash_on, file_lines, types_of
from tests.helpers.processes import reap

pytestmark = pytest.mark.timeout(60)

PAY = """
def charge(ctx):
    with open(ctx.project_dir / "effect.log", "a") as fh:
        fh.write(ctx.attempt_id + "\\n")
    return {"charged": ctx.input["amount"]}

workflow = define_workflow(
    start_at="prep",
    nodes=[
        compute("prep", lambda ctx: {"ok": True}),
        action("charge", charge),
        compute("after", lambda ctx: {"got": ctx.outputs["charge"]}),
    ],
    edges=[edge("prep", "charge"), edge("charge", "after")],
)
"""

SHELL_KILLS_ITS_WORKER = """
workflow = define_workflow(
    start_at="prep",
    nodes=[
        compute("prep", lambda ctx: {{"ok": True}}),
        # The first run kills the worker (its parent) mid-effect, with SIGKILL.
        shell("charge", "echo x >> effect.log; if [ ! -e killed ]; then touch killed;"
                        " kill -9 $PPID; fi", idempotent={idempotent}),
        compute("after", lambda ctx: {{"exit": ctx.outputs["charge"]["exitCode"]}}),
        compute("recover", lambda ctx: {{"recovered": ctx.results["charge"]["errorCode"]}}),
    ],
    edges=[edge("prep", "charge"),
           switch("charge", "$result.errorCode",
                  {{"effect_indeterminate": "recover", None: "after"}})],
)
"""


def _child(h: Harness, run_id: str, block_after: tuple[str, str | None] | None) -> Any:
    return processes.start_with_pipe(children.run_as_runner, str(h.store_path), str(h.runs),
                                     str(h.project), run_id, "worker-1", block_after)


def _take_over_dead(h: Harness, run_id: str) -> RunOutcome:
    """Prove the killed runner dead (pid + start time), move its claims, resume the run."""
    (dead,) = [r for r in h.store.list_runners() if r.runner_id == "worker-1"]
    assert not is_same_process(dead.pid, dead.pid_start_time)
    (claim,) = h.store.take_over_runner(dead, "runner-2")
    assert claim.run_id == run_id
    return execute_claim(h.store, claim, runs_dir=h.runs, project_dir=h.project, fsync="never")


def _effect_events(events: list[dict[str, Any]]) -> list[str]:
    return [e["payload"]["effect"] for e in events if e["type"] == "effect_recorded"]


@pytest.mark.slow  # kill -9 of a real worker process
def test_a_kill_after_the_effect_applied_never_repeats_it(h: Harness) -> None:
    h.write("pay", PAY)
    run_id = h.launch("pay", {"amount": 5})
    proc, conn = _child(h, run_id, ("effect_recorded", "applied"))
    try:
        kind, pid = processes.recv(conn)
        assert kind == "pid"
        kind, seq = processes.recv(conn)
        assert kind == "at"
        os.kill(pid, signal.SIGKILL)
        proc.join(30)
        assert proc.exitcode == -signal.SIGKILL
    finally:
        reap(proc)
    bundle = h.bundle(run_id)
    crashed = assert_well_formed(bundle)
    assert len(crashed) == seq
    assert _effect_events(crashed) == ["pending", "applied"]
    assert types_of(crashed)[-2:] == ["effect_recorded", "effect_recorded"]
    assert len(file_lines(h.project / "effect.log")) == 1
    assert h.store.get_effect(run_id, "charge", "step-2").state == "applied"  # type: ignore[union-attr]

    out = _take_over_dead(h, run_id)
    assert out.outcome == "completed"
    events = assert_well_formed(bundle)
    resumed = events[len(crashed):]
    assert resumed[0]["type"] == "run_resumed" and resumed[0]["payload"]["resumePoint"] == "charge"
    assert _effect_events(resumed) == ["replayed"]
    assert len(file_lines(h.project / "effect.log")) == 1  # not charged twice
    state = bundle.state()
    assert state["outputs"]["charge"] == {"charged": 5}
    assert state["finalOutput"] == {"got": {"charged": 5}}
    assert h.row(run_id).state == "done"


@pytest.mark.slow  # kill -9 of a real worker process
@pytest.mark.parametrize("idempotent", [False, True])
def test_a_kill_mid_effect(h: Harness, idempotent: bool) -> None:
    h.write("pay", SHELL_KILLS_ITS_WORKER.format(idempotent=idempotent))
    run_id = h.launch("pay")
    proc, conn = _child(h, run_id, None)
    try:
        assert processes.recv(conn)[0] == "pid"
        proc.join(30)  # the shell node kills it
        assert proc.exitcode == -signal.SIGKILL
    finally:
        reap(proc)
    bundle = h.bundle(run_id)
    crashed = assert_well_formed(bundle)
    assert crashed[-1]["type"] == "effect_recorded"
    assert crashed[-1]["payload"]["effect"] == "pending"
    assert h.store.get_effect(run_id, "charge", "step-2").state == "pending"  # type: ignore[union-attr]
    assert file_lines(h.project / "effect.log") == ["x"]

    out = _take_over_dead(h, run_id)
    assert out.outcome == "completed"
    state = bundle.state()
    effect = h.store.get_effect(run_id, "charge", "step-2")
    assert effect is not None
    resumed = assert_well_formed(bundle)[len(crashed):]
    if idempotent:
        # Rerun: the command ran a second time (it declared that safe).
        assert file_lines(h.project / "effect.log") == ["x", "x"]
        assert _effect_events(resumed) == ["pending", "applied"]
        assert effect.state == "applied"
        assert state["finalOutput"] == {"exit": 0}
    else:
        # Not repeated: reported indeterminate and routed by $result.errorCode.
        assert file_lines(h.project / "effect.log") == ["x"]
        assert _effect_events(resumed) == ["indeterminate"]
        assert effect.state == "indeterminate"
        assert state["results"]["charge"]["errorCode"] == "effect_indeterminate"
        assert state["finalOutput"] == {"recovered": "effect_indeterminate"}


def test_a_crash_after_a_shell_effect_applied_replays_its_output(h: Harness) -> None:
    h.write("echo", """
        workflow = define_workflow(
            start_at="say",
            nodes=[shell("say", "echo hello >> effect.log; echo out-$$"),
                   compute("after", lambda ctx: ctx.outputs["say"]["stdout"])],
            edges=[edge("say", "after")],
        )
    """)
    run_id = h.launch("echo")
    with pytest.raises(Crash):
        h.execute(run_id, engine_hook=lambda e: crash_on(e, "effect_recorded", after=True,
                                                         effect="applied"))
    out = h.after_crash(run_id)
    assert out.outcome == "completed"
    events = assert_well_formed(h.bundle(run_id))
    assert _effect_events(events) == ["pending", "applied", "replayed"]
    assert file_lines(h.project / "effect.log") == ["hello"]
    final = h.state(run_id)["finalOutput"]
    assert final.startswith("out-") and final == h.state(run_id)["outputs"]["say"]["stdout"]


def test_a_crash_before_a_non_idempotent_action_ran_is_still_indeterminate(h: Harness) -> None:
    """The guard cannot tell 'recorded pending, never ran' from 'ran, not recorded'."""
    h.write("pay", PAY.replace('edge("charge", "after")',
                               'switch("charge", "$result.outcome", {"failed": "after",'
                               ' "ok": "after"})').replace(
        'lambda ctx: {"got": ctx.outputs["charge"]}',
        'lambda ctx: {"got": ctx.results["charge"]["errorCode"]}'))
    run_id = h.launch("pay", {"amount": 1})
    with pytest.raises(Crash):
        h.execute(run_id, engine_hook=lambda e: crash_on(e, "effect_recorded", after=True,
                                                         effect="pending"))
    assert file_lines(h.project / "effect.log") == []
    assert h.after_crash(run_id).outcome == "completed"
    assert file_lines(h.project / "effect.log") == []
    assert h.state(run_id)["finalOutput"] == {"got": "effect_indeterminate"}


def test_an_effect_whose_request_changed_on_resume_fails_the_node_not_the_worker(
        h: Harness) -> None:
    """The command embeds the attempt id, so the rerun asks for a different effect."""
    h.write("drift", """
        workflow = define_workflow(
            start_at="say",
            nodes=[shell("say", lambda ctx: "echo " + ctx.attempt_id + " >> effect.log"),
                   compute("why", lambda ctx: ctx.results["say"]["errorCode"])],
            edges=[switch("say", "$result.outcome", {"failed": "why", "ok": "why"})],
        )
    """)
    run_id = h.launch("drift")
    with pytest.raises(Crash):
        h.execute(run_id, engine_hook=lambda e: crash_on(e, "effect_recorded", after=True,
                                                         effect="applied"))
    assert len(file_lines(h.project / "effect.log")) == 1
    out = h.after_crash(run_id)
    assert out.outcome == "completed"
    assert h.state(run_id)["finalOutput"] == "effect_conflict"
    assert _effect_events(assert_well_formed(h.bundle(run_id))) == [
        "pending", "applied", "conflict"]
    assert len(file_lines(h.project / "effect.log")) == 1


@pytest.mark.parametrize(("policy", "synced"), [("always", True), ("node", True),
                                                 ("never", False)])
def test_a_large_effect_result_is_durable_before_the_store_records_it(
        h: Harness, monkeypatch: pytest.MonkeyPatch, policy: str, synced: bool) -> None:
    """The store's applied record points at an artifact: it must be on disk by then."""
    h.write("big", """
        workflow = define_workflow(
            start_at="fetch",
            nodes=[action("fetch", lambda ctx: {"body": "b" * 6000})],
        )
    """)
    run_id = h.launch("big")
    writes: dict[str, bool] = {}
    real = artifacts_mod.write_atomic

    def recording(path: Any, data: bytes, *, sync: bool) -> None:
        writes[path.name] = sync
        real(path, data, sync=sync)

    monkeypatch.setattr(artifacts_mod, "write_atomic", recording)
    assert h.execute(run_id, fsync=policy).outcome == "completed"
    effect = h.store.get_effect(run_id, "fetch", "step-1")
    assert effect is not None and effect.state == "applied"
    ref = effect.result["output"]["body"]["$artifact"].split(":")[1]
    assert writes[ref] is synced
    assert h.state(run_id)["finalOutput"] == {"body": "b" * 6000}


def test_a_replayed_effect_whose_artifact_is_gone_fails_the_run_once(h: Harness) -> None:
    """A lost artifact cannot be repaired by rerunning: bundle_corrupt, not a crash loop."""
    h.write("big", """
        workflow = define_workflow(
            start_at="fetch",
            nodes=[action("fetch", lambda ctx: {"body": "b" * 6000}),
                   compute("after", lambda ctx: len(ctx.outputs["fetch"]["body"]))],
            edges=[edge("fetch", "after")],
        )
    """)
    run_id = h.launch("big")
    with pytest.raises(Crash):
        h.execute(run_id, engine_hook=lambda e: crash_on(e, "effect_recorded", after=True,
                                                         effect="applied"))
    for artifact in (h.bundle(run_id).artifacts.path).iterdir():
        artifact.unlink()
    out = h.after_crash(run_id)
    assert (out.outcome, out.error_code) == ("failed", "bundle_corrupt")
    row = h.row(run_id)
    assert (row.state, row.error_code) == ("failed", "bundle_corrupt")
    assert "missing its artifact" in (row.error_message or "")
