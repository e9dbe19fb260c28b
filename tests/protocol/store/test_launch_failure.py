"""Seed 002: a launch that fails after acknowledgement owes its session one follow-up."""

from __future__ import annotations

import pytest
from pi_workflows.protocol.errors import ConflictError
from pi_workflows.protocol.limits import MAX_ERROR_BYTES
from pi_workflows.protocol.store import Store, intent_id_for

from tests.helpers.store import SOURCE, all_rows, put_in_state

pytestmark = pytest.mark.timeout(30)


def _launch(store: Store, run_id: str = "r1", session: str = "s1") -> str:
    store.reserve(run_id, SOURCE, {"task": "secret-input-value"}, session)
    return store.claim_by_id(run_id, "runner-a", session=session).token


def test_a_failed_launch_creates_one_deterministic_intent_and_frees_the_session(
        store: Store) -> None:
    token = _launch(store)
    store.fail("r1", token, "source_changed", "the workflow file changed; start it again")
    token_, intents = store.claim_turn_intents("s1")
    assert [i.intent_id for i in intents] == [
        intent_id_for("s1", "r1", "launch_failed", "source_changed")]
    payload = intents[0].payload
    assert payload == {"workflow": "echo", "runId": "r1", "state": "failed",
                       "errorCode": "source_changed",
                       "error": "the workflow file changed; start it again"}
    assert store.find_session_reservation("s1") is None  # a corrected start may follow
    store.resolve_turn_intent(intents[0].intent_id, token_)
    assert store.claim_turn_intents("s1")[1] == []  # resolved once, never again
    again = _launch(store, "r2")
    assert again  # the session's slot was released


def test_the_stored_error_is_redacted_and_bounded_everywhere(store: Store) -> None:
    token = _launch(store)
    store.fail("r1", token, "activation_failed", "api_key=sk-live-123 " + "x" * 10_000)
    row = store.get("r1")
    assert row is not None and row.error_message is not None
    assert len(row.error_message.encode()) <= MAX_ERROR_BYTES
    assert "sk-live-123" not in row.error_message
    dump = repr(all_rows(store))
    assert "sk-live-123" not in dump and "secret-input-value" not in dump


@pytest.mark.parametrize("how", ["cancel_queued", "cancel_starting", "fail_running",
                                 "fail_detached", "fail_resuming"])
def test_no_follow_up_for_a_cancelled_launch_or_a_run_that_failed_later(
        store: Store, how: str) -> None:
    if how == "cancel_queued":
        store.reserve("r1", SOURCE, {}, "s1")
        store.cancel("r1")
    elif how == "cancel_starting":
        _launch(store)
        store.cancel("r1")
    elif how == "fail_running":
        token = _launch(store)
        store.mark_running("r1", token)
        store.fail("r1", token, "node_failed", "the node failed")
    elif how == "fail_detached":
        token = put_in_state(store, "r1", "starting")
        store.fail("r1", token, "workflow_invalid", "it does not load")
    else:  # a session's run that ran, parked, and fails while resuming: not a launch
        token = _launch(store)
        store.mark_running("r1", token)
        store.park("r1", token)
        again = store.claim_by_id("r1", "runner-b", session="s1")
        store.fail("r1", again.token, "workflow_invalid", "it does not load")
    assert store.claim_turn_intents("s1")[1] == []
    assert store.find_session_reservation("s1") is None


def test_an_intent_is_created_once_even_if_asked_again(store: Store) -> None:
    token = _launch(store)
    store.fail("r1", token, "source_changed", "changed")
    intent, created = store.create_turn_intent("s1", "r1", "launch_failed", "source_changed",
                                               {"again": True})
    assert not created and intent.payload["errorCode"] == "source_changed"
    with pytest.raises(ConflictError):  # one pending intent per (run, session)
        store.create_turn_intent("s1", "r1", "launch_failed", "other_cause", {})
