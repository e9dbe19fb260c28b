"""Seed 002's queue transitions: each allowed one works, every other one is refused.

A refused transition leaves the stored row byte-for-byte unchanged and
appends no run event.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pi_workflows.protocol.errors import ClaimLost, TransitionRefused
from pi_workflows.protocol.states import QUEUE_STATES, TRANSITIONS, allowed
from pi_workflows.protocol.store import Store

from tests.helpers.clocks import FakeClock
from tests.helpers.store import SOURCE, events, lapse, put_in_state, raw_row, snapshot

LEASE = 30_000

# Seed 002's "State transitions", spelled out here independently of the code.
SEED = frozenset({
    ("queued", "starting"), ("queued", "cancelled"),
    ("starting", "running"), ("starting", "failed"), ("starting", "cancelled"),
    ("starting", "queued"),
    ("running", "parked"), ("running", "done"), ("running", "failed"), ("running", "cancelled"),
    ("parked", "starting"), ("parked", "cancelled"),
})

# ---- allowed transitions ------------------------------------------------


def _assert_moved(store: Store, run_id: str, before: int, to_state: str,
                  from_state: str) -> None:
    row = store.get(run_id)
    assert row is not None and row.state == to_state
    new = events(store, run_id)[before:]
    assert [e.type for e in new] == [to_state]  # exactly one lifecycle event
    assert new[0].payload["from"] == from_state
    claimed = to_state in ("starting", "running")
    assert (row.claim_token is not None) is claimed
    assert (row.runner_id is not None) is claimed
    assert (row.lease_expires_at is not None) is claimed
    assert (row.finished_at is not None) is (to_state in ("done", "failed", "cancelled"))


def test_queued_to_starting(store: Store, clock: FakeClock[int]) -> None:
    store.enqueue_detached("r1", SOURCE, {"x": 1})
    n = len(events(store, "r1"))
    claim = store.claim_by_id("r1", "runner-a")
    assert (claim.state, claim.previous_state) == ("starting", "queued")
    assert claim.lease_expires_at == clock.now + LEASE
    _assert_moved(store, "r1", n, "starting", "queued")
    row = store.get("r1")
    assert row is not None and row.claim_token == claim.token and row.runner_id == "runner-a"
    assert row.has_private_input  # activation still needs it


def test_queued_to_cancelled(store: Store) -> None:
    store.enqueue_detached("r1", SOURCE, {"x": 1})
    n = len(events(store, "r1"))
    row = store.cancel("r1")
    assert row.error_code == "cancelled" and not row.has_private_input
    _assert_moved(store, "r1", n, "cancelled", "queued")


def test_starting_to_running(store: Store, clock: FakeClock[int]) -> None:
    token = put_in_state(store, "r1", "starting")
    n = len(events(store, "r1"))
    clock.advance(5)
    row = store.mark_running("r1", token)
    assert row.claim_token == token and row.started_at == clock.now
    assert not row.has_private_input
    _assert_moved(store, "r1", n, "running", "starting")


def test_starting_to_failed(store: Store) -> None:
    token = put_in_state(store, "r1", "starting")
    n = len(events(store, "r1"))
    row = store.fail("r1", token, "workflow_invalid", "node 3 has no prompt")
    assert (row.error_code, row.error_message) == ("workflow_invalid", "node 3 has no prompt")
    assert not row.has_private_input
    _assert_moved(store, "r1", n, "failed", "starting")


def test_starting_to_cancelled(store: Store) -> None:
    put_in_state(store, "r1", "starting")
    n = len(events(store, "r1"))
    row = store.cancel("r1")  # anyone may cancel a launch that has not started
    assert not row.has_private_input
    _assert_moved(store, "r1", n, "cancelled", "starting")


def test_starting_to_queued_after_lease_expiry(store: Store, clock: FakeClock[int],
                                              mono: FakeClock[float]) -> None:
    put_in_state(store, "r1", "starting")
    with pytest.raises(TransitionRefused):
        store.requeue_expired_starting("r1")  # watched for no time yet
    clock.advance(LEASE)  # nor is the wall clock what decides
    with pytest.raises(TransitionRefused):
        store.requeue_expired_starting("r1")
    lapse(store, mono)
    n = len(events(store, "r1"))
    row = store.requeue_expired_starting("r1")
    assert row.has_private_input  # the next activation needs the input again
    assert events(store, "r1")[-1].payload["reason"] == "lease_expired"
    _assert_moved(store, "r1", n, "queued", "starting")


def test_running_to_parked(store: Store) -> None:
    token = put_in_state(store, "r1", "running")
    n = len(events(store, "r1"))
    store.park("r1", token)
    _assert_moved(store, "r1", n, "parked", "running")


def test_running_to_done(store: Store) -> None:
    token = put_in_state(store, "r1", "running")
    n = len(events(store, "r1"))
    store.finish("r1", token)
    _assert_moved(store, "r1", n, "done", "running")


def test_running_to_failed(store: Store) -> None:
    token = put_in_state(store, "r1", "running")
    n = len(events(store, "r1"))
    row = store.fail("r1", token, "node_failed", "exit 3")
    assert row.error_code == "node_failed"
    _assert_moved(store, "r1", n, "failed", "running")


def test_running_to_cancelled_by_owner(store: Store) -> None:
    token = put_in_state(store, "r1", "running")
    before = snapshot(store, "r1")
    with pytest.raises(TransitionRefused):
        store.cancel("r1")  # not without the owner's token
    assert snapshot(store, "r1") == before
    n = len(events(store, "r1"))
    store.cancel("r1", token)
    _assert_moved(store, "r1", n, "cancelled", "running")


def test_parked_to_starting_by_id(store: Store) -> None:
    put_in_state(store, "r1", "parked")
    n = len(events(store, "r1"))
    claim = store.claim_by_id("r1", "runner-b")
    assert (claim.state, claim.previous_state) == ("starting", "parked")
    _assert_moved(store, "r1", n, "starting", "parked")


def test_parked_to_starting_by_claim_next(store: Store) -> None:
    put_in_state(store, "r1", "parked")
    n = len(events(store, "r1"))
    claim = store.claim_next("runner-b")
    assert claim is not None and (claim.run_id, claim.previous_state) == ("r1", "parked")
    _assert_moved(store, "r1", n, "starting", "parked")


def test_parked_to_cancelled(store: Store) -> None:
    put_in_state(store, "r1", "parked")
    n = len(events(store, "r1"))
    store.cancel("r1")
    _assert_moved(store, "r1", n, "cancelled", "parked")


def test_allowed_set_is_the_seed() -> None:
    assert {(str(a), str(b)) for a, b in TRANSITIONS} == SEED
    assert [str(s) for s in QUEUE_STATES] == ["queued", "starting", "running", "parked", "done",
                                              "failed", "cancelled"]
    assert all(allowed(a, b) == ((a, b) in SEED) for a in QUEUE_STATES for b in QUEUE_STATES)


# ---- disallowed transitions ---------------------------------------------------

Attempt = Callable[[Store, str, str], Any]

# For each target state, the public method that tries to reach it.
ATTEMPTS: dict[str, Attempt] = {
    "starting": lambda s, run, token: s.claim_by_id(run, "runner-b"),
    "running": lambda s, run, token: s.mark_running(run, token),
    "parked": lambda s, run, token: s.park(run, token),
    "done": lambda s, run, token: s.finish(run, token),
    "failed": lambda s, run, token: s.fail(run, token, "node_failed", "no"),
    "cancelled": lambda s, run, token: s.cancel(run, token),
    "queued": lambda s, run, token: s.requeue_expired_starting(run),
}

DISALLOWED = sorted(
    (str(a), str(b)) for a in QUEUE_STATES for b in QUEUE_STATES
    if a != b and (a, b) not in SEED
)


def test_every_pair_is_covered() -> None:
    assert len(DISALLOWED) == 30
    assert {b for _, b in DISALLOWED} <= set(ATTEMPTS)


@pytest.mark.parametrize(("from_state", "to_state"), DISALLOWED,
                         ids=[f"{a}->{b}" for a, b in DISALLOWED])
def test_disallowed_transition_is_refused(store: Store, clock: FakeClock[int], from_state: str,
                                          to_state: str) -> None:
    # The most authoritative token the caller could hold: the live one, or the last one.
    token = put_in_state(store, "r1", from_state)
    if to_state == "queued" and from_state != "starting":
        clock.advance(LEASE + 1)  # expiry is not what stops it: the state is
    before = snapshot(store, "r1")
    with pytest.raises((TransitionRefused, ClaimLost)):
        ATTEMPTS[to_state](store, "r1", token)
    assert snapshot(store, "r1") == before
    row = store.get("r1")
    assert row is not None and row.state == from_state


@pytest.mark.parametrize("state", ["starting", "running"])
def test_claim_of_a_live_claim_is_refused(store: Store, state: str) -> None:
    put_in_state(store, "r1", state)
    before = snapshot(store, "r1")
    with pytest.raises(TransitionRefused):
        store.claim_by_id("r1", "runner-b")
    assert store.claim_next("runner-b") is None
    assert snapshot(store, "r1") == before


def test_stale_token_cannot_move_a_taken_over_run(store: Store, mono: FakeClock[float]) -> None:
    old = put_in_state(store, "r1", "running")
    lapse(store, mono)
    new = store.claim_by_id("r1", "runner-b")
    assert new.state == "running" and new.token != old
    before = snapshot(store, "r1")
    for attempt in (store.park, store.finish, store.cancel,
                    lambda r, t: store.fail(r, t, "x", "y")):
        with pytest.raises(ClaimLost):
            attempt("r1", old)
    assert snapshot(store, "r1") == before
    assert raw_row(store, "r1") is not None
