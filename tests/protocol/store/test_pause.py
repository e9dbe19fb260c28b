"""``request_pause`` and ``unpause``: the ``paused`` code as one checked CAS.

A paused run keeps its queue state (seed 002's transitions stay as they
are): a queued or parked row with the code is held, no runner's pass takes
it, a claim by id is refused; a claimed row with it is asked to pause, and
the request survives a renewal, a takeover and a park. A refused request
leaves the row unchanged and appends nothing.
"""

from __future__ import annotations

import pytest
from pi_workflows.protocol.errors import TransitionRefused
from pi_workflows.protocol.states import display_state, is_paused, pause_pending
from pi_workflows.protocol.store import Store

from tests.helpers.clocks import FakeClock
from tests.helpers.store import SOURCE, events, lapse, put_in_state, raw_row

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("state", ["queued", "parked"])
def test_an_unowned_run_is_held_at_once_and_no_runner_takes_it(store: Store, state: str) -> None:
    put_in_state(store, "r1", state)
    row = store.request_pause("r1")
    assert (row.state, row.error_code) == (state, "paused")
    assert is_paused(row.state, row.error_code)
    assert display_state(row.state, "running", row.error_code) == "paused"
    assert events(store, "r1")[-1].type == "paused"
    assert store.claim_next("host-1") is None
    assert store.claim_next("session-runner", session="s1") is None
    with pytest.raises(TransitionRefused) as refused:
        store.claim_by_id("r1", "host-1")
    assert refused.value.code == "run_paused"
    assert store.request_pause("r1") == store.get("r1")  # asking again changes nothing


@pytest.mark.parametrize("state", ["queued", "parked"])
def test_unpause_frees_a_held_run_for_the_next_runner(store: Store, state: str) -> None:
    put_in_state(store, "r1", state)
    store.request_pause("r1")
    row = store.unpause("r1")
    assert (row.state, row.error_code) == (state, None)
    assert events(store, "r1")[-1].type == "unpaused"
    claim = store.claim_next("host-1")
    assert claim is not None and claim.run_id == "r1"


def test_a_session_reservation_paused_stays_its_sessions_and_is_not_activated(
        store: Store) -> None:
    store.reserve("r1", SOURCE, {"x": 1}, "s1")
    store.request_pause("r1")
    assert store.claim_next("session-runner", session="s1") is None
    with pytest.raises(TransitionRefused):
        store.claim_by_id("r1", "session-runner", session="s1")


@pytest.mark.parametrize("state", ["starting", "running"])
def test_a_claimed_run_is_asked_to_pause_and_renewal_tells_its_owner(
        store: Store, state: str) -> None:
    token = put_in_state(store, "r1", state)
    row = store.request_pause("r1")
    assert (row.state, row.claim_token) == (state, token)
    assert pause_pending(row.state, row.error_code) and not is_paused(row.state, row.error_code)
    assert events(store, "r1")[-1].type == "pause_requested"
    assert store.renew("r1", token).pause_requested is True
    store.unpause("r1")  # withdrawn before the boundary
    assert store.renew("r1", token).pause_requested is False


def test_the_owner_parks_it_paused_and_a_drain_keeps_the_request(store: Store) -> None:
    token = put_in_state(store, "r1", "running")
    store.request_pause("r1")
    row = store.park("r1", token)  # a drain before the boundary: still paused
    assert (row.state, row.error_code) == ("parked", "paused")
    assert store.claim_next("host-1") is None


def test_a_takeover_keeps_the_request(store: Store, mono: FakeClock[float]) -> None:
    put_in_state(store, "r1", "running")
    store.request_pause("r1")
    lapse(store, mono)
    claim = store.claim_next("host-2")
    assert claim is not None and claim.run_id == "r1"
    row = store.get("r1")
    assert row is not None and row.error_code == "paused"
    assert store.renew("r1", claim.token).pause_requested is True


def test_chat_s_hold_of_a_paused_run_keeps_it_paused(store: Store) -> None:
    put_in_state(store, "r1", "parked")
    store.request_pause("r1")
    claim = store.claim_by_id("r1", "chat-1", paused_ok=True)
    row = store.get("r1")
    assert row is not None and row.error_code == "paused"  # a takeover would pause it
    store.mark_running("r1", claim.token)
    store.park("r1", claim.token, code="paused", message="paused by request")
    assert store.claim_next("host-1") is None


def test_finishing_clears_a_request_that_came_after_the_last_boundary(store: Store) -> None:
    token = put_in_state(store, "r1", "running")
    store.request_pause("r1")
    row = store.finish("r1", token, "completed")
    assert (row.state, row.error_code) == ("done", None)


def test_cancel_ends_a_paused_run(store: Store) -> None:
    put_in_state(store, "r1", "queued")
    store.request_pause("r1")
    assert store.cancel("r1").state == "cancelled"


@pytest.mark.parametrize("state", ["done", "failed", "cancelled"])
def test_an_ended_run_is_refused_and_left_as_it_was(store: Store, state: str) -> None:
    put_in_state(store, "r1", state)
    before, n = raw_row(store, "r1"), len(events(store, "r1"))
    with pytest.raises(TransitionRefused) as refused:
        store.request_pause("r1")
    assert refused.value.code == "run_settled"
    assert raw_row(store, "r1") == before and len(events(store, "r1")) == n


def test_a_run_blocked_for_another_reason_is_refused(store: Store) -> None:
    token = put_in_state(store, "r1", "running")
    store.park("r1", token, code="source_changed", message="changed")
    with pytest.raises(TransitionRefused) as refused:
        store.request_pause("r1")
    assert refused.value.code == "run_blocked"
    assert store.get("r1").error_code == "source_changed"  # type: ignore[union-attr]


def test_unpause_of_a_run_that_is_not_paused_is_refused(store: Store) -> None:
    put_in_state(store, "r1", "parked")
    with pytest.raises(TransitionRefused) as refused:
        store.unpause("r1")
    assert refused.value.code == "not_paused"
