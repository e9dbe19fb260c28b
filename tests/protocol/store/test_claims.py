"""Claims and leases in one process: who may claim what, expiry, transfer, uniqueness."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest
from pi_workflows.protocol.errors import ClaimLost, ConflictError, TransitionRefused
from pi_workflows.protocol.store import QueueRow, Store

from tests.helpers.clocks import FakeClock
from tests.helpers.store import SOURCE, events, lapse, put_in_state, snapshot

LEASE = 30_000


def test_claim_next_prefers_affinity_then_oldest(store: Store, clock: FakeClock[int]) -> None:
    store.enqueue_detached("old", SOURCE, {})
    clock.advance(1)
    store.enqueue_detached("mine", SOURCE, {}, runner_affinity="runner-b")
    clock.advance(1)
    store.enqueue_detached("new", SOURCE, {})
    order = []
    for runner in ("runner-b", "runner-a", "runner-a"):
        claim = store.claim_next(runner)
        assert claim is not None
        order.append(claim.run_id)
    assert order == ["mine", "old", "new"]
    assert store.claim_next("runner-a") is None


def test_claim_next_takes_the_oldest_across_kinds(store: Store, clock: FakeClock[int],
                                                  mono: FakeClock[float]) -> None:
    token = put_in_state(store, "expired", "running")
    clock.advance(1)
    put_in_state(store, "parked", "parked")
    clock.advance(1)
    store.enqueue_detached("queued", SOURCE, {})
    lapse(store, mono)  # "expired" is now up for takeover and is the oldest
    got = [store.claim_next("runner-b") for _ in range(3)]
    assert [c.run_id for c in got if c] == ["expired", "parked", "queued"]
    assert got[0] is not None and got[0].state == "running" and got[0].token != token


def test_claim_next_leaves_kept_runs_it_saw_stall(
        store: Store, mono: FakeClock[float]) -> None:
    put_in_state(store, "mine", "running")
    put_in_state(store, "theirs", "running")
    store.enqueue_detached("queued", SOURCE, {}, runner_affinity="host")  # the affinity query too
    lapse(store, mono)  # neither renewed for a lease
    got = [store.claim_next("host", keep=("mine",)) for _ in range(3)]
    assert {c.run_id for c in got if c} == {"theirs", "queued"}  # kept only from expiry
    claim = store.claim_next("host")
    assert claim is not None and claim.run_id == "mine"


def test_host_never_claims_a_session_launch(store: Store, mono: FakeClock[float]) -> None:
    store.reserve("s-run", SOURCE, {"secret": 1}, "session-1")
    assert store.claim_next("host") is None
    claim = store.claim_next("rs", session="session-1")
    assert claim is not None and claim.run_id == "s-run"
    lapse(store, mono, LEASE * 10)  # an origin-bound starting row waits for its session
    before = snapshot(store, "s-run")
    assert store.claim_next("host") is None
    assert store.claim_next("rs2", session="session-2") is None
    assert snapshot(store, "s-run") == before
    again = store.claim_next("rs2", session="session-1")
    assert again is not None and again.run_id == "s-run" and again.state == "starting"


def test_host_takes_over_an_expired_running_session_run(
        store: Store, mono: FakeClock[float]) -> None:
    store.reserve("s-run", SOURCE, {}, "session-1")
    claim = store.claim_next("rs", session="session-1")
    assert claim is not None
    store.mark_running("s-run", claim.token)
    lapse(store, mono)
    taken = store.claim_next("host")
    assert taken is not None and taken.run_id == "s-run" and taken.state == "running"


def test_session_claims_only_its_own_or_unowned_rows(store: Store, clock: FakeClock[int]) -> None:
    store.reserve("theirs", SOURCE, {}, "session-2")
    clock.advance(1)
    store.enqueue_detached("free", SOURCE, {})
    clock.advance(1)
    store.reserve("mine", SOURCE, {}, "session-1")
    got = [store.claim_next("rs", session="session-1") for _ in range(3)]
    assert [c.run_id for c in got if c] == ["free", "mine"]
    with pytest.raises(TransitionRefused) as info:
        store.claim_by_id("theirs", "rs", session="session-1")
    assert info.value.code == "not_owner"


def test_takeover_of_a_stalled_claim_fences_the_old_token(store: Store,
                                                           mono: FakeClock[float]) -> None:
    old = put_in_state(store, "r1", "running")
    lapse(store, mono, LEASE - 1)
    assert store.claim_next("runner-b") is None  # one millisecond left: still owned
    mono.advance(0.001)
    new = store.claim_next("runner-b")
    assert new is not None and new.token != old and new.state == "running"
    assert events(store, "r1")[-1].type == "claim_taken_over"
    assert events(store, "r1")[-1].payload["previousRunner"] == "runner-a"
    for op in (store.verify, store.renew, store.finish, store.park):
        with pytest.raises(ClaimLost):
            op("r1", old)
    store.verify("r1", new.token)
    store.finish("r1", new.token)


def test_renew_extends_the_claim_until_it_is_taken_over(
        store: Store, clock: FakeClock[int], mono: FakeClock[float]) -> None:
    token = put_in_state(store, "r1", "running")
    clock.advance(LEASE - 1)
    renewal = store.renew("r1", token)
    assert renewal.lease_expires_at == clock.now + LEASE and not renewal.cancel_requested
    clock.advance(LEASE)  # past its wall-clock lease: the token still holds it
    assert store.renew("r1", token).lease_expires_at == clock.now + LEASE
    lapse(store, mono)
    assert store.claim_next("runner-b") is not None
    before = snapshot(store, "r1")
    with pytest.raises(ClaimLost):
        store.renew("r1", token)
    assert snapshot(store, "r1") == before


def test_mark_running_needs_the_current_claim(store: Store, mono: FakeClock[float]) -> None:
    token = put_in_state(store, "r1", "starting")
    lapse(store, mono)
    assert store.claim_by_id("r1", "runner-b").token != token
    before = snapshot(store, "r1")
    with pytest.raises(ClaimLost):
        store.mark_running("r1", token)
    assert snapshot(store, "r1") == before


def test_cancel_of_starting_invalidates_the_activation_fence(store: Store) -> None:
    token = put_in_state(store, "r1", "starting")
    store.cancel("r1")
    for op in (store.verify, store.mark_running, store.renew):
        with pytest.raises(ClaimLost):
            op("r1", token)
    with pytest.raises(ClaimLost):
        store.private_input("r1", token)
    row = store.get("r1")
    assert row is not None and row.state == "cancelled"


def test_request_cancel_is_seen_on_renewal(store: Store) -> None:
    token = put_in_state(store, "r1", "running")
    assert not store.renew("r1", token).cancel_requested
    store.request_cancel("r1")
    assert store.renew("r1", token).cancel_requested
    assert events(store, "r1")[-1].type == "cancel_requested"
    store.cancel("r1", token)
    put_in_state(store, "r2", "queued")
    with pytest.raises(TransitionRefused):
        store.request_cancel("r2")


def test_cancel_needs_the_owner_token_even_if_the_run_starts_meanwhile(
        store: Store, make_store: Callable[..., Store]) -> None:
    """Regression: ``cancel`` without a token read the state, then moved in a second step.

    The owner activates the run while ``cancel`` is under way (simulated by
    activating on the first read ``cancel`` makes through ``get``, if any).
    Either cancel wins before activation or it is refused; a running run is
    never cancelled without its token.
    """
    other = make_store()
    token = put_in_state(store, "r1", "starting")
    real_get = store.get

    def racing_get(run_id: str) -> QueueRow | None:
        row = real_get(run_id)
        if row is not None and row.state == "starting":
            other.mark_running(run_id, token)
        return row

    store.get = racing_get  # type: ignore[method-assign]
    with contextlib.suppress(TransitionRefused):
        store.cancel("r1")
    types = [e.type for e in events(other, "r1")]
    row = other.get("r1")
    assert row is not None
    assert not ("running" in types and row.state == "cancelled"), types


# ---- reservations and continuations --------------------------------------------


def test_one_active_reservation_per_session(store: Store) -> None:
    store.reserve("a", SOURCE, {}, "session-1")
    with pytest.raises(ConflictError) as info:
        store.reserve("b", SOURCE, {}, "session-1")
    assert info.value.code == "session_busy"
    assert store.get("b") is None
    store.reserve("c", SOURCE, {}, "session-2")  # another session is independent
    found = store.find_session_reservation("session-1")
    assert found is not None and found.run_id == "a"


@pytest.mark.parametrize("end", ["failed", "cancelled", "done"])
def test_an_ended_reservation_frees_the_session(store: Store, end: str) -> None:
    store.reserve("a", SOURCE, {}, "session-1")
    claim = store.claim_next("rs", session="session-1")
    assert claim is not None
    if end == "failed":
        store.fail("a", claim.token, "activation_failed", "no")
    elif end == "cancelled":
        store.cancel("a")
    else:
        store.mark_running("a", claim.token)
        store.finish("a", claim.token)
    assert store.find_session_reservation("session-1") is None
    store.reserve("b", SOURCE, {}, "session-1")


def test_running_keeps_the_reservation(store: Store) -> None:
    store.reserve("a", SOURCE, {}, "session-1")
    claim = store.claim_next("rs", session="session-1")
    assert claim is not None
    store.mark_running("a", claim.token)
    with pytest.raises(ConflictError):
        store.reserve("b", SOURCE, {}, "session-1")


def test_parked_run_of_a_busy_session_is_skipped(store: Store, clock: FakeClock[int]) -> None:
    """Regression: the host claimed such a row and hit the unique index (a permanent error)."""
    store.reserve("a", SOURCE, {}, "session-1")
    claim = store.claim_next("rs", session="session-1")
    assert claim is not None
    store.mark_running("a", claim.token)
    store.park("a", claim.token)
    clock.advance(1)
    store.reserve("b", SOURCE, {}, "session-1")  # parked frees the session
    clock.advance(1)
    store.enqueue_detached("free", SOURCE, {})
    before = snapshot(store, "a")
    got = store.claim_next("host")
    assert got is not None and got.run_id == "free"
    with pytest.raises(ConflictError) as info:
        store.claim_by_id("a", "host")
    assert info.value.code == "session_busy"
    assert snapshot(store, "a") == before
    store.cancel("b")
    resumed = store.claim_next("host")
    assert resumed is not None and resumed.run_id == "a"


def test_one_continuation_per_parent(store: Store) -> None:
    put_in_state(store, "parent", "done")
    first = store.insert_and_claim("cont-1", SOURCE, {}, "runner-a", parent_run_id="parent")
    with pytest.raises(ConflictError) as info:
        store.enqueue_detached("cont-2", SOURCE, {}, parent_run_id="parent")
    assert info.value.code == "continuation_exists"
    store.fail("cont-1", first.token, "activation_failed", "no")
    second = store.insert_and_claim("cont-2", SOURCE, {}, "runner-a", parent_run_id="parent")
    store.mark_running("cont-2", second.token)
    store.finish("cont-2", second.token)
    with pytest.raises(ConflictError):  # a finished continuation still holds the slot
        store.enqueue_detached("cont-3", SOURCE, {}, parent_run_id="parent")


def test_delete_unstarted_continuation(store: Store, clock: FakeClock[int]) -> None:
    put_in_state(store, "parent", "done")
    claim = store.insert_and_claim("cont-1", SOURCE, {}, "runner-a", parent_run_id="parent")
    with pytest.raises(ClaimLost):
        store.delete_unstarted_continuation("cont-1", "not-the-token")
    store.delete_unstarted_continuation("cont-1", claim.token)
    assert store.get("cont-1") is None
    assert events(store, "cont-1")[-1].type == "deleted"
    store.enqueue_detached("cont-2", SOURCE, {}, parent_run_id="parent")  # slot is free
    plain = put_in_state(store, "plain", "starting")
    with pytest.raises(TransitionRefused):
        store.delete_unstarted_continuation("plain", plain)
    assert store.get("plain") is not None


def test_a_cancel_request_while_starting_reaches_the_owner_at_activation(store: Store) -> None:
    token = put_in_state(store, "r1", "starting")
    store.request_cancel("r1")
    row = store.mark_running("r1", token)
    assert row.state == "running" and row.cancel_requested
    assert store.cancel("r1", token).state == "cancelled"


def test_a_blocked_park_waits_for_a_person(store: Store) -> None:
    token = put_in_state(store, "r1", "running")
    row = store.park("r1", token, code="source_changed", message="the file changed")
    assert (row.state, row.error_code, row.error_message) == (
        "parked", "source_changed", "the file changed")
    assert store.claim_next("host-1") is None  # no runner takes it on its own
    claim = store.claim_by_id("r1", "person")  # an explicit resume does
    assert claim.previous_state == "parked"
    row = store.get("r1")
    assert row is not None and row.error_code is None and row.error_message is None


def test_a_rotated_claim_fences_out_the_old_token(store: Store, clock: FakeClock[int]) -> None:
    store.enqueue_detached("r1", SOURCE, {})
    claim = store.claim_next("runner-a")
    assert claim is not None
    before = events(store, "r1")
    clock.advance(LEASE - 1)
    fresh = store.rotate("r1", claim.token)
    assert fresh.token != claim.token and (fresh.run_id, fresh.runner_id) == ("r1", "runner-a")
    assert fresh.state == claim.state and fresh.lease_expires_at == clock() + LEASE
    with pytest.raises(ClaimLost):
        store.verify("r1", claim.token)  # a worker that still holds it writes nothing
    with pytest.raises(ClaimLost):
        store.rotate("r1", claim.token)
    assert store.verify("r1", fresh.token).state == claim.state
    assert events(store, "r1") == before  # the same claim: nothing to tell the feed
    clock.advance(LEASE)
    assert store.rotate("r1", fresh.token).token != fresh.token  # no wall clock judges it
