"""Private run input: held only while activation needs it, never in the feed."""

from __future__ import annotations

import json

import pytest
from pi_workflows.protocol.errors import ClaimLost
from pi_workflows.protocol.store import Store

from tests.helpers.clocks import FakeClock
from tests.helpers.store import SOURCE, all_rows, lapse, put_in_state, raw_row

MARKER = "PRIVATE-MARKER-7f3a9c"
INPUT = {"task": "deploy", "credentials": {"note": MARKER}, "list": [MARKER, 1]}


def _stored_input(store: Store, run_id: str) -> object:
    row = raw_row(store, run_id)
    assert row is not None
    return row["private_input"]


@pytest.mark.parametrize("state", ["queued", "starting"])
def test_input_is_kept_before_running(store: Store, state: str) -> None:
    put_in_state(store, "r1", state, private_input=INPUT)
    assert json.loads(str(_stored_input(store, "r1"))) == INPUT


@pytest.mark.parametrize("state", ["running", "failed", "cancelled", "parked", "done"])
def test_input_is_cleared_from_running_on(store: Store, state: str) -> None:
    put_in_state(store, "r1", state, private_input=INPUT)
    assert _stored_input(store, "r1") is None
    row = store.get("r1")
    assert row is not None and not row.has_private_input


def test_input_is_cleared_when_a_starting_launch_is_cancelled(store: Store) -> None:
    put_in_state(store, "r1", "starting", private_input=INPUT)
    store.cancel("r1")
    assert _stored_input(store, "r1") is None


def test_only_the_claim_holder_reads_the_input(store: Store, mono: FakeClock[float]) -> None:
    store.reserve("r1", SOURCE, INPUT, "session-1")
    with pytest.raises(ClaimLost):
        store.private_input("r1", "guess")  # queued: nobody holds a claim
    claim = store.claim_next("runner-a", session="session-1")
    assert claim is not None
    assert store.private_input("r1", claim.token) == INPUT
    with pytest.raises(ClaimLost):
        store.private_input("r1", "guess")
    lapse(store, mono)
    new = store.claim_next("runner-b", session="session-1")
    with pytest.raises(ClaimLost):
        store.private_input("r1", claim.token)  # a claim taken over reads nothing
    assert new is not None and store.private_input("r1", new.token) == INPUT
    store.mark_running("r1", new.token)
    assert store.private_input("r1", new.token) is None


def test_input_never_reaches_the_feed_or_other_tables(store: Store) -> None:
    store.reserve("ok", SOURCE, INPUT, "session-1")
    claim = store.claim_next("runner-a", session="session-1")
    assert claim is not None
    store.renew("ok", claim.token)
    store.mark_running("ok", claim.token)
    store.request_cancel("ok")
    store.finish("ok", claim.token)
    bad = put_in_state(store, "bad", "starting", private_input=INPUT)
    store.fail("bad", bad, "input_invalid", "field 'task' is not allowed")
    put_in_state(store, "gone", "queued", private_input=INPUT)
    store.cancel("gone")

    feed = store.events_since(0)
    assert {e.run_id for e in feed} == {"ok", "bad", "gone"}
    for event in feed:
        assert MARKER not in json.dumps(event.payload)
    for table, rows in all_rows(store).items():
        for row in rows:
            assert MARKER not in repr(row), table


def test_the_public_view_has_no_input(store: Store) -> None:
    put_in_state(store, "r1", "starting", private_input=INPUT)
    row = store.get("r1")
    assert row is not None and row.has_private_input
    assert MARKER not in json.dumps(row.public())
    assert MARKER not in repr(row)
