"""Issue 22, item 6 and 7: every deferred turn a run's end owes its session, exactly once."""

from __future__ import annotations

import pytest
from pi_workflows.protocol.errors import ClaimLost, PresentationPending
from pi_workflows.protocol.store import Store, intent_id_for
from pi_workflows.protocol.store.turns import (
    AGENT_CANCELLED,
    CLAIM_LOST,
    PRESENTATION,
    RUN_FAILED,
)

from tests.helpers.store import SOURCE, all_rows

pytestmark = pytest.mark.timeout(30)


def _running(store: Store, run_id: str = "r1", *, by_agent: bool = True,
             session: str = "s1") -> str:
    store.reserve(run_id, SOURCE, {"task": "secret-input-value"}, session, by_agent=by_agent)
    token = store.claim_by_id(run_id, "runner-a", session=session).token
    store.mark_running(run_id, token)
    return token


def _pending(store: Store, session: str = "s1") -> list[tuple[str, str]]:
    return [(i.source_event, i.cause) for i in store.claim_turn_intents(session)[1]]


@pytest.mark.parametrize("status", ["failed", "timed_out"])
def test_a_model_started_run_that_fails_after_it_started_owes_one_turn(
        store: Store, status: str) -> None:
    token = _running(store)
    store.fail("r1", token, "node_failed", "the node failed", run_status=status)
    token_, intents = store.claim_turn_intents("s1")
    assert [i.intent_id for i in intents] == [
        intent_id_for("s1", "r1", RUN_FAILED, "node_failed")]
    assert intents[0].payload == {"workflow": "echo", "runId": "r1", "state": "failed",
                                  "runStatus": status, "errorCode": "node_failed",
                                  "error": "the node failed"}
    store.resolve_turn_intent(intents[0].intent_id, token_)
    assert store.claim_turn_intents("s1")[1] == []
    assert "secret-input-value" not in repr(all_rows(store)["workflow_turn_intents"])


def test_a_run_the_person_started_gets_no_turn_when_it_fails(store: Store) -> None:
    token = _running(store, by_agent=False)  # `/workflow NAME`, `run --session`
    store.fail("r1", token, "node_failed", "the node failed")
    assert _pending(store) == []


def test_the_agents_cancel_owes_a_turn_only_once_the_run_ended_cancelled(store: Store) -> None:
    token = _running(store)
    store.request_cancel("r1", by_session="s1")
    assert _pending(store) == []  # still running: nothing yet
    store.cancel("r1", token)  # its owner carries the request out
    assert _pending(store) == [(AGENT_CANCELLED, "cancelled")]


@pytest.mark.parametrize("state", ["queued", "starting"])
def test_the_agents_cancel_of_an_active_unclaimed_run_owes_a_turn_at_once(
        store: Store, state: str) -> None:
    store.reserve("r1", SOURCE, {}, "s1", by_agent=True)
    if state == "starting":
        store.claim_by_id("r1", "runner-a", session="s1")
    store.cancel("r1", by_session="s1")
    assert _pending(store) == [(AGENT_CANCELLED, "cancelled")]


def test_the_agents_cancel_of_a_parked_or_paused_run_owes_none(store: Store) -> None:
    store.park("r1", _running(store))  # not active: the tool call itself says it ended
    store.cancel("r1", by_session="s1")
    token = _running(store, "r2")
    store.park("r2", token, code="paused", message="paused by request")
    store.cancel("r2", by_session="s1")
    assert _pending(store) == []


def test_a_request_the_owner_parked_before_it_saw_is_still_the_agents(store: Store) -> None:
    token = _running(store)
    store.request_cancel("r1", by_session="s1")
    store.park("r1", token)  # a drain came first; `cancel` carries the request out
    store.cancel("r1")
    assert _pending(store) == [(AGENT_CANCELLED, "cancelled")]


def test_no_turn_for_a_persons_cancel_pause_or_park(store: Store) -> None:
    token = _running(store)
    store.request_pause("r1")
    store.park("r1", token, code="paused", message="paused by request")  # pause, hold
    store.unpause("r1")
    again = store.claim_by_id("r1", "runner-b", session="s1").token
    store.mark_running("r1", again)
    store.park("r1", again)  # a shutdown parks
    again = store.claim_by_id("r1", "runner-c", session="s1").token
    store.mark_running("r1", again)
    store.request_cancel("r1")  # `/workflow cancel`, `pi-workflows cancel`
    store.cancel("r1", again)
    assert _pending(store) == []


def test_a_persons_later_cancel_request_takes_the_agents_turn_away(store: Store) -> None:
    token = _running(store)
    store.request_cancel("r1", by_session="s1")
    store.request_cancel("r1")
    store.cancel("r1", token)
    assert _pending(store) == []


def test_a_presentation_is_one_intent_and_refuses_new_starts_until_resolved(
        store: Store) -> None:
    token = _running(store, by_agent=False)
    store.finish("r1", token, "completed", presentation="Tell the user about it.")
    with pytest.raises(PresentationPending) as refused:
        store.reserve("r2", SOURCE, {}, "s1")
    assert refused.value.exit_code == 2 and refused.value.code == "presentation_pending"
    with pytest.raises(PresentationPending):
        store.insert_and_claim("r3", SOURCE, {}, "runner-a", origin_session="s1")
    assert [r[0] for r in all_rows(store)["workflow_run_queue"]] == ["r1"]
    token_, intents = store.claim_turn_intents("s1")
    assert [(i.source_event, i.cause) for i in intents] == [(PRESENTATION, "completed")]
    assert intents[0].payload["message"] == "Tell the user about it."
    # The text is in the intent only: never in the feed.
    assert "Tell the user" not in repr(all_rows(store)["run_events"])
    store.reserve("r2", SOURCE, {}, "other")  # another session is not held up
    store.resolve_turn_intent(intents[0].intent_id, token_)
    store.reserve("r4", SOURCE, {}, "s1")


def test_no_presentation_without_a_prompt_or_a_session(store: Store) -> None:
    token = _running(store)
    store.finish("r1", token, "completed")
    store.enqueue_detached("r2", SOURCE, {})
    claim = store.claim_by_id("r2", "runner-a")
    store.mark_running("r2", claim.token)
    store.finish("r2", claim.token, "completed", presentation="nobody to tell")
    assert _pending(store) == [] and store.list_turn_intents() == []


def test_a_continuation_presents_to_the_session_it_reports_to(store: Store) -> None:
    store.enqueue_detached("r1", SOURCE, {}, notify_session="s1")
    claim = store.claim_by_id("r1", "runner-a")
    store.mark_running("r1", claim.token)
    store.finish("r1", claim.token, "waiting", presentation="Ask the user.")
    assert _pending(store) == [(PRESENTATION, "waiting")]


def test_the_claim_lost_turn_is_created_once_whoever_asks(store: Store) -> None:
    _running(store)
    first, created = store.owe_claim_lost_turn("s1", "r1", "plan", "a-1", workflow="echo")
    assert created and first is not None
    assert first.intent_id == intent_id_for("s1", "r1", CLAIM_LOST, "plan/a-1")
    assert first.payload == {"runId": "r1", "nodeId": "plan", "attemptId": "a-1",
                             "workflow": "echo"}
    again, created = store.owe_claim_lost_turn("s1", "r1", "plan", "a-1")
    assert not created and again is not None and again.intent_id == first.intent_id
    # Another attempt while the first is pending: the session still gets one turn.
    other, created = store.owe_claim_lost_turn("s1", "r1", "plan", "a-2")
    assert not created and other is not None and other.intent_id == first.intent_id
    token, intents = store.claim_turn_intents("s1")
    assert [i.intent_id for i in intents] == [first.intent_id]
    store.resolve_turn_intent(first.intent_id, token)
    # Resolved: the same loss asked again stays resolved, never a second turn.
    resolved, created = store.owe_claim_lost_turn("s1", "r1", "plan", "a-1")
    assert not created and resolved is not None and resolved.state == "resolved"
    assert store.claim_turn_intents("s1")[1] == []


def test_a_pending_turn_never_blocks_the_runs_end(store: Store) -> None:
    token = _running(store)
    store.owe_claim_lost_turn("s1", "r1", "plan", "a-1")
    store.fail("r1", token, "node_failed", "failed")  # the one pending intent stands
    assert _pending(store) == [(CLAIM_LOST, "plan/a-1")]
    row = store.get("r1")
    assert row is not None and row.state == "failed"


def test_settling_twice_creates_nothing_more(store: Store) -> None:
    token = _running(store)
    store.fail("r1", token, "node_failed", "failed")
    token_, intents = store.claim_turn_intents("s1")
    store.resolve_turn_intent(intents[0].intent_id, token_)
    # A second writer of the same end (a retry after a crash) finds the row settled.
    with pytest.raises(ClaimLost):
        store.fail("r1", token, "node_failed", "failed")
    assert len(store.list_turn_intents()) == 1


def test_a_natural_turn_resolves_a_moot_claim_lost_turn_instead_of_sending_both(
        store: Store) -> None:
    token = _running(store, by_agent=False)
    store.owe_claim_lost_turn("s1", "r1", "plan", "a-1")
    # The run's presentation is the one turn the session gets about it.
    store.finish("r1", token, "completed", presentation="Tell the user about it.")
    assert _pending(store) == [(PRESENTATION, "completed")]
    states = {i.source_event: i.state for i in store.list_turn_intents()}
    assert states == {CLAIM_LOST: "resolved", PRESENTATION: "pending"}


def test_the_next_step_message_resolves_a_claim_lost_turn_unless_it_is_being_delivered(
        store: Store) -> None:
    _running(store)
    store.owe_claim_lost_turn("s1", "r1", "plan", "a-1")
    assert store.supersede_turns("other", "r1") == 0  # another session's: untouched
    token, [leased] = store.claim_turn_intents("s1")
    assert store.supersede_turns("s1", "r1") == 0  # on its way to the session: left to it
    assert store.release_turn_intent(leased.intent_id, token)
    assert store.supersede_turns("s1", "r1") == 1
    assert _pending(store) == []
    # A failure or a cancel is news, not moot: a step message does not resolve it.
    token2 = _running(store, "r2", session="s2")
    store.fail("r2", token2, "node_failed", "failed")
    assert store.supersede_turns("s2", "r2") == 0
    assert _pending(store, "s2") == [(RUN_FAILED, "node_failed")]
