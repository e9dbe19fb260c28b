"""The drill's invariant checker fires on every kind of bad durable state.

Each test starts from a good run's durable state (which must check clean),
breaks one thing the way a product bug would, and asserts that exactly the
expected violation kind is reported with the run's id. The last tests build
the bad state on disk (a real store, bundle directories, the ledger, file
modes, a live marked process) and read it back with ``collect``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pi_workflows.protocol.bundle import Bundle
from pi_workflows.protocol.paths import Paths, project_key
from pi_workflows.protocol.store import RunSource, Store
from pi_workflows.protocol.wire import MARKER_ENV
from pi_workflows.supervisor.drill.checker import KINDS, Violation, check, resource_marks
from pi_workflows.supervisor.drill.durable import Durable, RunFacts, collect, conversation

from tests.helpers.processes import reap

RUN = "20261201T120000Z-chain-0000aaaa"


def ev(seq: int, type_: str, node: str | None = None, attempt: str | None = None,
       at: int = 0, **payload: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"seq": seq, "type": type_, "runId": RUN, "at": at or 1000 + seq,
                             "payload": payload}
    if node is not None:
        event["nodeId"], event["attemptId"] = node, attempt
    return event


def trace(events: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def good_events() -> list[dict[str, Any]]:
    """a -> fx (a guarded effect) -> b, interrupted in fx and resumed there."""
    return [
        ev(1, "run_started", startAt="a"),
        ev(2, "node_started", "a", "a-1-aaaaaa", step=1),
        ev(3, "node_finished", "a", "a-1-aaaaaa", next="fx"),
        ev(4, "node_started", "fx", "fx-2-bbbbbb", step=2),
        ev(5, "effect_recorded", "fx", "fx-2-bbbbbb", effect="pending"),
        ev(6, "run_resumed", at=2000, boundary=True, resumePoint="fx"),
        ev(7, "node_started", "fx", "fx-2-cccccc", step=2, rerun=True),
        ev(8, "effect_recorded", "fx", "fx-2-cccccc", effect="replayed"),
        ev(9, "node_finished", "fx", "fx-2-cccccc", next="b"),
        ev(10, "node_started", "b", "b-3-dddddd", step=3),
        ev(11, "node_finished", "b", "b-3-dddddd", next=None),
        ev(12, "run_completed"),
    ]


FEED = [{"seq": 1, "type": "queued", "payload": {}},
        {"seq": 2, "type": "starting", "payload": {"from": "queued"}},
        {"seq": 3, "type": "running", "payload": {"from": "starting"}},
        {"seq": 4, "type": "parked", "payload": {"from": "running"}},
        {"seq": 5, "type": "starting", "payload": {"from": "parked"}},
        {"seq": 6, "type": "running", "payload": {"from": "starting"}},
        {"seq": 7, "type": "done", "payload": {"from": "running"}}]


def good(events: list[dict[str, Any]] | None = None) -> Durable:
    events = good_events() if events is None else events
    run = RunFacts(RUN, row={"state": "done", "originSession": "d0", "notifySession": "d0",
                             "parentRunId": None, "startedAt": 1001, "errorCode": None},
                   feed=[dict(e) for e in FEED], trace=trace(events),
                   state={"traceSeq": len(events), "status": "completed"},
                   effects=[{"nodeId": "fx", "effectKey": "step-2", "state": "applied",
                             "attemptId": "fx-2-bbbbbb", "updatedAt": 1500}])
    return Durable(runs={RUN: run}, launched=[RUN], ledger=[f"{RUN} fx 0"],
                   deliveries=[{"session": "d0", "notification": 1, "runId": RUN}],
                   watermarks={"d0": 7})


def kinds(found: list[Violation]) -> list[str]:
    return sorted({v.kind for v in found})


def only(found: list[Violation], kind: str) -> Violation:
    assert kinds(found) == [kind], found
    assert found[0].evidence
    return found[0]


@pytest.mark.parametrize("final", [False, True])
def test_a_good_run_has_no_violation(final: bool) -> None:
    assert check(good(), final=final, watermarks={"d0": 7}) == []


def test_a_gap_or_a_duplicate_seq_is_a_trace_seq_violation() -> None:
    events = good_events()
    events[4]["seq"] = 4  # two lines say seq 4
    assert only(check(good(events), final=False), "trace_seq").run_id == RUN
    durable = good()
    durable.runs[RUN].trace = trace(good_events()[:5]) + b"not json\n" + \
        trace(good_events()[6:])
    assert "not JSON" in only(check(durable, final=False), "trace_seq").evidence


def test_a_torn_tail_is_fine_mid_run_but_not_in_a_settled_bundle() -> None:
    durable = good(good_events()[:5])
    run = durable.runs[RUN]
    run.trace = (run.trace or b"") + b'{"seq": 6, "type": "node_fi'
    run.state, run.row = {"traceSeq": 5, "status": "running"}, dict(run.row or {}, state="parked")
    durable.ledger, run.effects = [], []
    assert check(durable, final=False) == []
    run.state = {"traceSeq": 5, "status": "completed"}
    assert "torn" in only(check(durable, final=False), "trace_seq").evidence


def test_trace_seq_behind_after_settling_and_a_trace_shorter_than_the_projection() -> None:
    durable = good()
    durable.runs[RUN].state = {"traceSeq": 11, "status": "completed"}
    assert only(check(durable, final=True), "trace_seq_behind").run_id == RUN
    durable.runs[RUN].state = {"traceSeq": 13, "status": "completed"}
    assert "lost lines" in only(check(durable, final=False), "trace_seq_behind").evidence
    durable.runs[RUN].state = {"traceSeq": 9, "status": "running"}
    durable.runs[RUN].row["state"] = "running"  # type: ignore[index]
    assert "3 lines behind" in only(check(durable, final=False), "trace_seq_behind").evidence
    # The lag is judged from the trace as read before the projection.
    durable.runs[RUN].trace_before = trace(good_events()[:10])
    assert check(durable, final=False) == []
    durable.runs[RUN].trace_before = trace(good_events()[:11])
    assert "2 lines behind" in only(check(durable, final=False), "trace_seq_behind").evidence


def test_a_node_that_ends_again_without_being_routed_to_finished_twice() -> None:
    events = [*good_events()[:11], ev(12, "node_started", "b", "b-4-eeeeee", step=4),
              ev(13, "node_finished", "b", "b-4-eeeeee", next=None), ev(14, "run_completed")]
    assert only(check(good(events), final=False), "node_finished_twice").run_id == RUN
    again = [*good_events()[:11], ev(12, "node_finished", "b", "b-3-dddddd", next="a"),
             ev(13, "run_completed")]
    found = check(good(again), final=False)
    assert "attempt b-3-dddddd ended 2 times" in {v.evidence for v in found}


def test_a_loop_routed_back_to_a_node_is_not_finished_twice() -> None:
    events = [ev(1, "run_started", startAt="a"),
              ev(2, "node_started", "a", "a-1-aaaaaa"), ev(3, "node_finished", "a", "a-1-aaaaaa",
                                                             next="a"),
              ev(4, "node_started", "a", "a-2-bbbbbb"), ev(5, "node_failed", "a", "a-2-bbbbbb",
                                                           next=None),
              ev(6, "run_completed")]
    durable = good(events)
    durable.runs[RUN].effects, durable.ledger = [], []
    assert check(durable, final=True) == []


def test_a_ledger_line_twice_is_an_effect_applied_twice() -> None:
    durable = good()
    durable.ledger.append(f"{RUN} fx 0")
    assert only(check(durable, final=False), "effect_applied_twice").run_id == RUN
    durable.ledger = [f"{RUN} fx 0", f"{RUN} fx 1"]  # two runs of one recorded effect
    assert "2 ledger lines, 1 effect" in only(check(durable, final=False),
                                              "effect_applied_twice").evidence


def test_an_applied_effect_without_its_ledger_line_is_missing() -> None:
    durable = good()
    durable.ledger = []
    assert only(check(durable, final=False), "effect_missing").run_id == RUN


def test_an_old_attempt_writing_after_the_resume_boundary_is_a_stale_write() -> None:
    events = good_events()
    # The superseded attempt of fx settles its effect in the trace after the resume.
    events.insert(7, ev(8, "effect_recorded", "fx", "fx-2-bbbbbb", effect="applied"))
    for seq, event in enumerate(events, 1):
        event["seq"] = seq
    assert "fx-2-bbbbbb" in only(check(good(events), final=False), "stale_write").evidence


def test_an_effect_settled_by_a_superseded_attempt_after_the_resume_is_a_stale_write() -> None:
    durable = good()
    durable.runs[RUN].effects[0]["updatedAt"] = 2500  # after run_resumed (at 2000)
    assert "after the run was resumed" in only(check(durable, final=False),
                                               "stale_write").evidence


def test_an_event_after_the_terminal_one_is_a_write_after_end() -> None:
    events = [*good_events(), ev(13, "update_published", "b", None, message="late")]
    durable = good(events)
    assert only(check(durable, final=False), "write_after_end").run_id == RUN


def test_a_watermark_that_moved_backwards() -> None:
    found = check(good(), final=False, watermarks={"d0": 9})
    assert "9 -> 7" in only(found, "watermark_backwards").evidence


def test_a_launch_activated_twice_in_the_trace_or_the_feed() -> None:
    events = good_events()
    events[5] = ev(6, "run_started", startAt="a")
    found = check(good(events), final=False)
    assert "2 run_started events" in {v.evidence for v in found}
    assert "activated_twice" in kinds(found)
    durable = good()
    durable.runs[RUN].feed[3:5] = [{"seq": 4, "type": "starting", "payload": {"from": "queued"}}]
    assert only(check(durable, final=False), "activated_twice").run_id == RUN


def test_a_requeued_launch_is_activated_once() -> None:
    durable = good()
    durable.runs[RUN].feed[2:2] = [{"seq": 0, "type": "queued", "payload": {"from": "starting"}},
                                   {"seq": 0, "type": "starting", "payload": {"from": "queued"}}]
    assert check(durable, final=True) == []


def test_a_notification_or_a_follow_up_delivered_twice() -> None:
    durable = good()
    durable.deliveries.append({"session": "d0", "notification": 1, "runId": RUN})
    assert only(check(durable, final=False), "delivered_twice").run_id == RUN
    durable = good()
    durable.deliveries += [{"session": "d0", "intent": "ti-1", "runId": RUN}] * 2
    assert "intent ti-1" in only(check(durable, final=False), "delivered_twice").evidence


def _failed_launch() -> Durable:
    """A launch that failed at activation (its source changed), before it ran."""
    durable = good([ev(1, "run_started", startAt="a"), ev(2, "run_failed")])
    durable.ledger = []
    run = durable.runs[RUN]
    run.effects = []
    run.row.update(state="failed", startedAt=None, errorCode="source_changed")  # type: ignore[union-attr]
    run.state = {"traceSeq": 2, "status": "failed"}
    run.feed = [{"seq": 1, "type": "queued", "payload": {}},
                {"seq": 2, "type": "starting", "payload": {"from": "queued"}},
                {"seq": 3, "type": "failed", "payload": {"from": "starting"}}]
    return durable


def test_a_failed_launch_needs_its_follow_up_recorded_and_delivered() -> None:
    durable = _failed_launch()
    durable.intents = [{"intentId": "ti-1", "sessionId": "d0", "runId": RUN,
                        "state": "resolved"}]
    assert check(durable, final=True) == []
    durable.intents = []  # the failing transaction wrote no intent
    assert "no turn intent" in only(check(durable, final=True), "follow_up_lost").evidence
    durable.intents = [{"intentId": "ti-1", "sessionId": "d0", "runId": RUN,
                        "state": "pending"}]  # never delivered by the final syncs
    assert "still pending" in only(check(durable, final=True), "follow_up_lost").evidence
    assert check(durable, final=False) == []  # mid-drill it may not be synced yet


def test_a_run_that_failed_in_a_way_no_fault_explains() -> None:
    durable = _failed_launch()  # source_changed: a doomed launch, as the drill makes them
    durable.intents = [{"intentId": "ti-1", "sessionId": "d0", "runId": RUN,
                        "state": "resolved"}]
    assert check(durable, final=True) == []
    durable.runs[RUN].row["errorCode"] = "shell_nonzero_exit"  # type: ignore[index]
    found = only(check(durable, final=True), "unexpected_failure")
    assert "'shell_nonzero_exit'" in found.evidence
    assert check(durable, final=False) == []  # judged once the drill has settled


def test_lost_stuck_and_mismatched_runs_after_settling() -> None:
    durable = good()
    durable.launched.append("20261201T120001Z-chain-0000bbbb")
    assert only(check(durable, final=True), "run_lost").run_id == \
        "20261201T120001Z-chain-0000bbbb"
    assert check(durable, final=False) == []  # mid-drill it may just not be written yet
    durable = good()
    durable.runs[RUN].row["state"] = "parked"  # type: ignore[index]
    assert only(check(durable, final=True), "run_stuck").run_id == RUN
    durable = good()
    durable.runs[RUN].row["state"] = "failed"  # type: ignore[index]
    assert only(check(durable, final=True), "queue_bundle_mismatch").run_id == RUN
    durable = good()
    durable.runs[RUN].trace, durable.runs[RUN].state = None, None
    assert "no readable bundle" in only(check(durable, final=True), "run_lost").evidence


def test_leftover_processes_and_loose_modes() -> None:
    durable = good()
    durable.marked = [{"pid": 4242, "cmd": "python -m pi_workflows.worker", "marker": "k/r/x"}]
    assert "4242" in only(check(durable, final=True), "leftover_process").evidence
    durable = good()
    durable.loose = [{"path": "/s/runs/x/state.json", "mode": "0o644", "kind": "file"}]
    assert "0o644" in only(check(durable, final=False), "loose_permissions").evidence


def test_a_run_failed_by_a_full_disk_a_raw_disk_full_error_and_a_host_that_exited() -> None:
    durable = good()
    durable.runs[RUN].row.update(state="failed", errorCode="worker_crash_loop",  # type: ignore[union-attr]
                                 errorMessage="OSError: [Errno 28] No space left on device")
    durable.runs[RUN].state = {"traceSeq": 12, "status": "failed"}
    found = only(check(durable, final=True), "disk_full_mishandled")
    assert "worker_crash_loop" in found.evidence and found.run_id == RUN
    durable.runs[RUN].row.update(errorCode="agent_exited",  # type: ignore[union-attr]
                                 errorMessage="pi exited (status 1) during the step: Error:"
                                              " ENOSPC: no space left on device, write")
    assert "agent_exited" in only(check(durable, final=True), "disk_full_mishandled").evidence
    durable = good()
    durable.disk_full_noise = ["host.log: OSError: [Errno 28] No space left on device"]
    assert "raw error" in only(check(durable, final=True), "disk_full_mishandled").evidence
    assert check(durable, final=False) == []  # the logs are read at the end
    durable = good()
    durable.host_exits = [{"pid": 4242, "code": 70}]
    assert "4242 exited 70" in only(check(durable, final=False), "host_exited").evidence


# ---- in-session agent steps (pi_session_kill9) ------------------------------------------


def agent_events(finisher: str = "plan-2-cccccc") -> list[dict[str, Any]]:
    """warm -> plan (an agent step) -> fx: plan's first attempt in the session, cut off
    when its Pi was killed; the run resumed, plan's second attempt headless (with
    ``finisher`` plan-2-bbbbbb: the session's attempt finished plan, no resume)."""
    if finisher == "plan-2-bbbbbb":
        return [ev(1, "run_started", startAt="warm"),
                ev(2, "node_started", "warm", "warm-1-aaaaaa", step=1),
                ev(3, "node_finished", "warm", "warm-1-aaaaaa", next="plan"),
                ev(4, "node_started", "plan", "plan-2-bbbbbb", step=2),
                ev(5, "agent_prompt_sent", "plan", "plan-2-bbbbbb", via="session"),
                ev(6, "node_finished", "plan", "plan-2-bbbbbb", next="fx"),
                ev(7, "node_started", "fx", "fx-3-dddddd", step=3),
                ev(8, "node_finished", "fx", "fx-3-dddddd", next=None),
                ev(9, "run_completed")]
    return [
        ev(1, "run_started", startAt="warm"),
        ev(2, "node_started", "warm", "warm-1-aaaaaa", step=1),
        ev(3, "node_finished", "warm", "warm-1-aaaaaa", next="plan"),
        ev(4, "node_started", "plan", "plan-2-bbbbbb", step=2),
        ev(5, "agent_prompt_sent", "plan", "plan-2-bbbbbb", via="session"),
        ev(6, "run_resumed", at=2000, boundary=True, resumePoint="plan"),
        ev(7, "node_started", "plan", "plan-2-cccccc", step=2, rerun=True),
        ev(8, "agent_prompt_sent", "plan", "plan-2-cccccc", via="headless"),
        ev(9, "node_finished", "plan", finisher, next="fx"),
        ev(10, "node_started", "fx", "fx-3-dddddd", step=3),
        ev(11, "node_finished", "fx", "fx-3-dddddd", next=None),
        ev(12, "run_completed"),
    ]


def talk(accepted: list[str] | None = None, follow_ups: list[str] | None = None,
         ) -> dict[str, Any]:
    """A Pi session file as ``durable.conversation`` reads it back."""
    return {"file": "s1.jsonl",
            "steps": {"plan-2-bbbbbb": {"runId": RUN, "step": "plan"}},
            "accepted": accepted or [], "followUps": follow_ups or [],
            "followUpRuns": {i: RUN for i in follow_ups or []}}


def test_an_in_session_step_handed_over_after_a_kill_checks_clean() -> None:
    durable = good(agent_events())
    durable.conversations = [talk(follow_ups=["ti-1", "ti-2"])]
    assert check(durable, final=True, watermarks={"d0": 7}) == []


def test_a_step_accepted_in_the_session_then_redone_by_another_attempt() -> None:
    """The session's submit was accepted (the tool answered it without an error), yet
    the node finished by the headless attempt: the result was accepted twice."""
    durable = good(agent_events())
    durable.conversations = [talk(accepted=["plan-2-bbbbbb"])]
    found = only(check(durable, final=False), "step_accepted_twice")
    assert found.run_id == RUN and "plan-2-bbbbbb accepted in the session" in found.evidence
    # The node finished by the attempt the session handed in: accepted once.
    durable = good(agent_events(finisher="plan-2-bbbbbb"))
    durable.conversations = [talk(accepted=["plan-2-bbbbbb"])]
    assert check(durable, final=False) == []


def test_one_attempts_submit_accepted_twice_in_the_session() -> None:
    durable = good(agent_events(finisher="plan-2-bbbbbb"))
    durable.conversations = [talk(accepted=["plan-2-bbbbbb"]), talk(accepted=["plan-2-bbbbbb"])]
    assert "accepted 2 times" in only(check(durable, final=False),
                                      "step_accepted_twice").evidence


def test_an_agent_step_finished_by_two_attempts_in_the_trace() -> None:
    events = agent_events()
    events.insert(6, ev(6, "node_finished", "plan", "plan-2-bbbbbb", next="fx"))
    for seq, event in enumerate(events, 1):
        event["seq"] = seq
    found = check(good(events), final=False)
    assert "step_accepted_twice" in kinds(found)
    [twice] = [v for v in found if v.kind == "step_accepted_twice"]
    assert "plan finished 2 times" in twice.evidence


def test_a_deferred_turn_delivered_twice_into_one_session() -> None:
    durable = good()
    durable.conversations = [talk(follow_ups=["ti-1", "ti-2", "ti-1"])]
    found = only(check(durable, final=False), "turn_sent_twice")
    assert found.run_id == RUN and "ti-1" in found.evidence and "2 times" in found.evidence


@pytest.mark.timeout(30)
def test_a_pi_session_file_is_read_back_as_steps_accepted_submits_and_turns(
        tmp_path: Path) -> None:
    def custom(**details: Any) -> dict[str, Any]:
        return {"type": "custom_message", "customType": "pi-workflows", "content": "x",
                "display": True, "details": details}

    def result(attempt: str, error: bool) -> dict[str, Any]:
        return {"type": "message", "message": {
            "role": "toolResult", "toolCallId": "c1", "toolName": "workflow", "isError": error,
            "content": [{"type": "text", "text": "ok"}],
            "details": {} if error else {"action": "submit", "step": "plan",
                                         "attempt": attempt}}}

    entries = [{"type": "session", "id": "s1"},
               custom(kind="step", runId=RUN, step="plan", attempt="plan-2-bbbbbb"),
               result("plan-2-bbbbbb", error=True),  # refused: not accepted
               result("plan-2-bbbbbb", error=False),
               custom(intentId="ti-1", runId=RUN, kind="follow_up"),
               custom(kind="report", runId=RUN)]
    path = tmp_path / "s1.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries) + '{"type": "mess')
    assert conversation(path) == talk(accepted=["plan-2-bbbbbb"], follow_ups=["ti-1"])


# ---- controller resources (issue 24) -------------------------------------------------

UID = "res-0000aaaa"


def controller_state() -> Durable:
    """Resource r1 at generation 2, observed and Ready; one write effect per generation,
    each with its ledger line; its last status write at version 5, which it is at."""
    effects = [{"controller": "ledger", "key": "r1", "effectKey": f"write-{g}", "kind": "file",
                "generation": g, "state": "applied"} for g in (1, 2)]
    resource = {"controller": "ledger", "key": "r1", "uid": UID, "resourceVersion": 5,
                "generation": 2, "deletionRequested": False, "finalizers": ["ledger"],
                "status": {"observed_generation": 2, "conditions": [
                    {"type": "Ready", "status": "true", "reason": "InSync"}]},
                "events": [{"type": "spec_changed", "uid": UID, "data": {"generation": 2}},
                           {"type": "settled", "uid": UID,
                            "data": {"outcome": "settled", "resourceVersion": 5}}]}
    return Durable(resources=[resource], ctl_effects=effects,
                   ctl_ledger=[f"ledger r1 write-{g} {UID}" for g in (1, 2)])


@pytest.mark.parametrize("final", [False, True])
def test_a_good_controller_resource_checks_clean(final: bool) -> None:
    assert check(controller_state(), final=final, marks={UID: (1, 3)}) == []


def test_an_applied_reconcile_effect_repeated() -> None:
    durable = controller_state()
    durable.ctl_ledger.append(f"ledger r1 write-2 {UID}")  # applied again after a crash
    assert "2 times" in only(check(durable, final=False), "effect_repeated").evidence
    durable = controller_state()  # another key, the same generation, applied too
    durable.ctl_effects.append({"controller": "ledger", "key": "r1", "effectKey": "write-x",
                                "kind": "file", "generation": 2, "state": "applied"})
    durable.ctl_ledger.append(f"ledger r1 write-x {UID}")
    found = only(check(durable, final=False), "effect_repeated")
    assert "2 applied write effect records for generation 2" in found.evidence
    durable.ctl_effects[-1]["state"] = "indeterminate"  # recorded, never applied: fine
    assert check(durable, final=False) == []


def test_an_applied_reconcile_effect_without_its_ledger_line() -> None:
    durable = controller_state()
    durable.ctl_ledger.pop()
    assert "write-2" in only(check(durable, final=False), "effect_missing").evidence


def test_a_status_write_lost() -> None:
    durable = controller_state()  # seen at observed generation 2 before, now at 1
    found = only(check(durable, final=False, marks={UID: (3, 3)}), "status_lost")
    assert "observed generation 3 -> 2" in found.evidence
    durable = controller_state()  # the store accepted version 5, the resource is at 4
    durable.resources[0]["resourceVersion"] = 4
    assert "wrote version 5" in only(check(durable, final=False), "status_lost").evidence
    durable = controller_state()  # a resource re-created under the key starts over
    durable.resources[0].update(uid="res-0000bbbb", resourceVersion=1, generation=1)
    durable.resources[0]["status"]["observed_generation"] = 1
    durable.ctl_ledger = [f"ledger r1 write-{g} res-0000bbbb" for g in (1, 2)]
    assert check(durable, final=False, marks={UID: (2, 5)}) == []
    durable.resources[0]["status"]["observed_generation"] = 2  # of generation 1
    assert "observes generation 2 of 1" in \
        only(check(durable, final=False), "status_lost").evidence


def test_the_marks_carry_a_resources_last_seen_status_to_the_next_check() -> None:
    marks = resource_marks(controller_state(), {UID: (1, 7)})
    assert marks == {UID: (2, 7)}  # the newer of each, so neither goes back unseen
    durable = controller_state()
    durable.resources[0]["status"]["observed_generation"] = 1
    assert "2 -> 1" in only(check(durable, final=False, marks=marks), "status_lost").evidence


def test_a_resource_stuck_after_settling() -> None:
    durable = controller_state()
    durable.resources[0]["generation"] = 3  # a new spec never observed
    assert "generation 3, observed 2" in \
        only(check(durable, final=True), "resource_stuck").evidence
    assert check(durable, final=False) == []  # mid-drill it is just not reconciled yet
    durable = controller_state()
    durable.resources[0]["deletionRequested"] = True
    assert "deletion requested" in only(check(durable, final=True), "resource_stuck").evidence
    durable = controller_state()
    durable.resources[0]["status"]["conditions"][0].update(status="false", reason="Reporting")
    assert "Reporting" in only(check(durable, final=True), "resource_stuck").evidence


def test_a_controller_child_run_may_fail_interrupted_and_no_other_run() -> None:
    durable = _failed_launch()
    durable.intents = [{"intentId": "ti-1", "sessionId": "d0", "runId": RUN,
                        "state": "resolved"}]
    durable.runs[RUN].row.update(errorCode="interrupted", workflow="ctlchild")  # type: ignore[union-attr]
    assert check(durable, final=True) == []
    durable.runs[RUN].row["workflow"] = "chain"  # type: ignore[index]
    assert "'interrupted'" in only(check(durable, final=True), "unexpected_failure").evidence


@pytest.mark.timeout(30)
def test_collect_reads_resources_and_their_events_from_a_real_store(
        tmp_path: Path) -> None:
    paths = paths_under(tmp_path)
    paths.state_dir.mkdir(mode=0o700)
    with Store(paths.store_file) as store:
        store.apply_spec("ledger", "r1", {"text": "a"})
        store.apply_spec("ledger", "r1", {"text": "b"})  # generation 2, never reconciled
    (tmp_path / "ctl-ledger.txt").write_text("ledger r1 write-1 res-x\nledger r1 write-1 res-x\n")
    durable = collect(paths, [], tmp_path, tmp_path / "ledger.txt")
    [res] = durable.resources
    assert (res["key"], res["generation"], res["deletionRequested"]) == ("r1", 2, False)
    assert [e["type"] for e in res["events"]] == ["applied", "spec_changed"]
    assert durable.ctl_ledger == ["ledger r1 write-1 res-x"] * 2
    found = check(durable, final=True)
    assert sorted(v.kind for v in found) == ["effect_repeated", "resource_stuck"], found


def test_every_kind_has_a_test_above() -> None:
    text = Path(__file__).read_text()
    assert [k for k in KINDS if f'"{k}"' not in text] == []


# ---- bad state on disk, read back by collect -------------------------------------------


def paths_under(root: Path) -> Paths:
    state = root / "state"
    return Paths(project=root, home=root / "home", state_dir=state,
                 store_file=state / "store.sqlite3", runs_dir=state / "runs",
                 host_lock=state / "host.lock", log_dir=state / "logs")


def write_bundle(paths: Paths, run_id: str, events: list[dict[str, Any]],
                 status: str) -> Path:
    bundle = paths.runs_dir / run_id
    bundle.mkdir(parents=True, mode=0o700)
    (bundle / "trace.ndjson").write_bytes(trace(events))
    (bundle / "state.json").write_text(json.dumps({"traceSeq": len(events), "status": status}))
    for name in ("trace.ndjson", "state.json"):
        os.chmod(bundle / name, 0o600)
    return bundle


def running_run(tmp_path: Path) -> tuple[Paths, str]:
    """A store under ``tmp_path`` with RUN claimed and running; (paths, its token)."""
    paths = paths_under(tmp_path)
    paths.state_dir.mkdir(mode=0o700)
    source = RunSource("chain", str(tmp_path / "chain.workflow.py"), "ab" * 32,
                       "sha256:" + "0" * 64)
    with Store(paths.store_file) as store:
        store.enqueue_detached(RUN, source, {})
        claim = store.claim_by_id(RUN, "runner-1")
        store.mark_running(RUN, claim.token)
    return paths, claim.token


def test_collect_reads_bad_state_from_a_real_store_bundles_and_ledger(tmp_path: Path) -> None:
    paths, token = running_run(tmp_path)
    with Store(paths.store_file) as store:
        store.begin_effect(RUN, "fx", "step-2", "f" * 64, "fx-2-bbbbbb", token=token)
        store.apply_effect(RUN, "fx", "step-2", {"ok": True}, token=token)
        store.advance_watermark("d0", 2)
    events = good_events()
    events[8]["seq"] = 8  # a duplicate seq
    events[5]["at"] = 10**15  # resumed long after the effect was applied: not stale
    bundle = write_bundle(paths, RUN, events, "completed")
    os.chmod(bundle / "state.json", 0o644)
    ledger = tmp_path / "ledger.txt"
    ledger.write_text(f"{RUN} fx 0\n{RUN} fx 0\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "deliveries.ndjson").write_text(
        json.dumps({"session": "d0", "intent": "ti-9", "runId": RUN}) + "\n" +
        json.dumps({"session": "d0", "intent": "ti-9", "runId": RUN}) + "\n")
    durable = collect(paths, [RUN, "20261201T120001Z-chain-0000bbbb"], work, ledger)
    assert durable.watermarks == {"d0": 2}
    assert [e["type"] for e in durable.runs[RUN].feed] == ["queued", "starting", "running"]
    found = check(durable, final=True, watermarks={"d0": 5})
    assert set(kinds(found)) == {"trace_seq", "effect_applied_twice", "delivered_twice",
                                 "run_lost", "run_stuck", "loose_permissions",
                                 "watermark_backwards"}, found
    assert {v.run_id for v in found if v.kind == "run_stuck"} == {RUN}


@pytest.mark.timeout(30)
def test_collect_finds_a_live_process_carrying_the_projects_marker(tmp_path: Path) -> None:
    paths = paths_under(tmp_path)
    marker = f"{project_key(tmp_path)}/runner-1/{RUN}"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             env={**os.environ, MARKER_ENV: marker})
    try:
        durable = collect(paths, [], tmp_path, tmp_path / "ledger.txt", processes=True)
        found = check(durable, final=True)
        assert [v.kind for v in found] == ["leftover_process"]
        assert str(child.pid) in found[0].evidence
    finally:
        reap(child)


def test_the_ledger_is_judged_against_the_store_it_was_read_around() -> None:
    # Read before the store: the line of an effect applied meanwhile is not there yet,
    # and that is no missing effect; read after: a line whose record came later is no
    # duplicate. The same lines the other way round are violations.
    durable = good()
    durable.ledger_before, durable.ledger = [], [f"{RUN} fx 0"]
    assert check(durable, final=False) == []
    durable.ledger_before, durable.ledger = [f"{RUN} fx 0", f"{RUN} fx 1"], [f"{RUN} fx 0"]
    assert kinds(check(durable, final=False)) == ["effect_applied_twice"]
    durable.ledger_before, durable.ledger = [f"{RUN} fx 0"], []
    assert kinds(check(durable, final=False)) == ["effect_missing"]


@pytest.mark.timeout(30)
def test_a_run_that_writes_while_it_is_read_does_not_look_as_if_it_lost_a_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer appends (trace line, then projection) between collect's two reads."""
    paths, _ = running_run(tmp_path)
    events = good_events()[:4]
    bundle = write_bundle(paths, RUN, events, "running")
    nxt = good_events()[4]
    real_read = Path.read_bytes

    def one_more_step(self: Path) -> bytes:
        data = real_read(self)
        if self.name in ("trace.ndjson", "state.json") and not (bundle / "done").exists():
            (bundle / "done").write_text("")  # the writer's step, in its order
            with open(bundle / "trace.ndjson", "ab") as fh:
                fh.write(trace([nxt]))
            (bundle / "state.json").write_text(json.dumps({"traceSeq": 5, "status": "running"}))
        return data

    monkeypatch.setattr(Path, "read_bytes", one_more_step)
    durable = collect(paths, [RUN], tmp_path, tmp_path / "ledger.txt")
    monkeypatch.undo()
    assert not [v for v in check(durable, final=False) if v.kind == "trace_seq_behind"]


@pytest.mark.timeout(30)
def test_a_run_that_takes_steps_while_it_is_read_does_not_look_as_if_it_lagged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three steps (trace line, then projection, each) land between the projection's
    read and the trace's: the trace read last is 3 lines ahead, and nothing is wrong."""
    paths, _ = running_run(tmp_path)
    events = good_events()
    bundle = write_bundle(paths, RUN, events[:4], "running")
    real_state = Bundle.raw_state

    def three_more_steps(self: Bundle) -> Any:
        state = real_state(self)
        if not (bundle / "done").exists():
            (bundle / "done").write_text("")
            for n in (5, 6, 7):
                with open(bundle / "trace.ndjson", "ab") as fh:
                    fh.write(trace([events[n - 1]]))
                (bundle / "state.json").write_text(json.dumps({"traceSeq": n,
                                                               "status": "running"}))
        return state

    monkeypatch.setattr(Bundle, "raw_state", three_more_steps)
    durable = collect(paths, [RUN], tmp_path, tmp_path / "ledger.txt")
    monkeypatch.undo()
    run = durable.runs[RUN]
    assert run.state is not None and run.state["traceSeq"] == 4
    assert run.trace is not None and run.trace.count(b"\n") == 7  # read after the steps
    assert not [v for v in check(durable, final=False) if v.kind == "trace_seq_behind"]


@pytest.mark.timeout(30)
def test_a_projection_rewritten_while_it_is_read_is_read_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """state.json is renamed over (a full rewrite) while the first read is under way."""
    paths, _ = running_run(tmp_path)
    events = good_events()
    bundle = write_bundle(paths, RUN, events[:7], "running")
    real_state = Bundle.raw_state

    def rewritten_meanwhile(self: Bundle) -> Any:
        state = real_state(self)
        if not (bundle / "done").exists():
            (bundle / "done").write_text("")
            with open(bundle / "trace.ndjson", "ab") as fh:
                fh.write(trace(events[7:9]))
            new = bundle / "state.json.new"
            new.write_text(json.dumps({"traceSeq": 9, "status": "running"}))
            os.replace(new, bundle / "state.json")
        return state

    monkeypatch.setattr(Bundle, "raw_state", rewritten_meanwhile)
    durable = collect(paths, [RUN], tmp_path, tmp_path / "ledger.txt")
    monkeypatch.undo()
    assert durable.runs[RUN].state == {"traceSeq": 9, "status": "running"}


def test_a_run_resumed_while_only_the_clock_stepped_is_a_clock_step_restart(
        tmp_path: Path) -> None:
    from pi_workflows.supervisor.drill.clockstep import ClockStepper, Watched
    from pi_workflows.supervisor.drill.hosts import Hosts
    from pi_workflows.supervisor.drill.scratch import Scratch

    scratch = Scratch.create(tmp_path / "drill", 1)
    stepper = ClockStepper.install(scratch, Hosts(scratch))
    trace = scratch.paths.runs_dir / RUN / "trace.ndjson"
    trace.parent.mkdir(parents=True)
    lines = [{"seq": 1, "type": "run_started", "payload": {}},
             {"seq": 2, "type": "run_resumed", "payload": {"boundary": False}}]  # a pause
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    stepper._judge([Watched(RUN, 4242, 0)])
    assert stepper.violations == []
    lines.append({"seq": 3, "type": "run_resumed", "payload": {"boundary": True}})
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    stepper._judge([Watched(RUN, 4242, 0)])
    assert [(v.kind, v.run_id) for v in stepper.violations] == [("clock_step_restart", RUN)]
    assert "4242" in stepper.violations[0].evidence
    assert scratch.env["PI_WORKFLOWS_DRILL_CLOCK_OFFSET"] == str(stepper.offset_file)
    assert stepper.offset_file.read_text() == "+0\n"
