"""Retention in the store: which chains may go, and removing one consistently."""

from __future__ import annotations

import pytest
from pi_workflows.protocol.store import Store

from tests.helpers.clocks import FakeClock
from tests.helpers.store import SOURCE, all_rows, put_in_state

pytestmark = pytest.mark.timeout(30)
DAY = 86_400_000


def _settle(store: Store, run_id: str, how: str, *, parent: str | None = None) -> str:
    """A run that ended: completed, waiting, failed or cancelled (or any other state)."""
    if parent is not None:
        store.enqueue_detached(run_id, SOURCE, {}, parent_run_id=parent)
        if how == "queued":
            return ""
        token = store.claim_by_id(run_id, "runner-a").token
        store.mark_running(run_id, token)
        if how == "running":
            return token
    elif how in ("completed", "waiting"):
        token = put_in_state(store, run_id, "running")
    else:
        return put_in_state(store, run_id, how)
    if how == "failed":
        store.fail(run_id, token, "boom", "it broke")
    elif how == "cancelled":
        store.cancel(run_id, token)
    else:
        store.finish(run_id, token, how)
    return token


def _removable(store: Store, cutoff: int) -> list[list[str]]:
    from pi_workflows.protocol.store.retention import blocker
    return [c.run_ids for c in store.chains() if blocker(c, cutoff) is None]


def test_only_settled_runs_older_than_the_cutoff_may_go(
        store: Store, clock: FakeClock[int]) -> None:
    for state in ("queued", "starting", "running", "parked", "failed", "cancelled"):
        _settle(store, f"old-{state}", state)
    _settle(store, "old-completed", "completed")
    _settle(store, "old-waiting", "waiting")
    clock.advance(DAY)
    _settle(store, "new-completed", "completed")
    cutoff = clock.now  # new-completed settled exactly at the cutoff: not older than it
    assert sorted(_removable(store, cutoff)) == [["old-cancelled"], ["old-completed"],
                                                  ["old-failed"]]
    assert ["new-completed"] in _removable(store, cutoff + 1)


def test_a_chain_goes_whole_and_only_when_every_run_of_it_settled(
        store: Store, clock: FakeClock[int]) -> None:
    _settle(store, "answered", "waiting")
    _settle(store, "answered-c", "completed", parent="answered")
    _settle(store, "open", "waiting")
    _settle(store, "open-c", "queued", parent="open")
    _settle(store, "reopened", "waiting")  # its continuation failed: it waits again
    _settle(store, "reopened-c", "failed", parent="reopened")
    clock.advance(DAY)
    child = store.claim_by_id("open-c", "runner-a").token
    store.mark_running("open-c", child)
    _settle(store, "young", "waiting")
    _settle(store, "young-c", "completed", parent="young")  # the child is newer than the cutoff
    clock.advance(1)
    cutoff = clock.now - 1
    assert _removable(store, cutoff) == [["answered", "answered-c"]]
    store.finish("open-c", child, "completed")
    assert ["open", "open-c"] not in _removable(store, cutoff)  # settled, but after the cutoff
    assert ["open", "open-c"] in _removable(store, clock.now + 1)
    holds = {c.run_ids[0]: blocker_code(store, c.run_ids, cutoff) for c in store.chains()}
    assert holds["reopened"] == "waiting" and holds["young"] == "recent"


def blocker_code(store: Store, run_ids: list[str], cutoff: int) -> str | None:
    from pi_workflows.protocol.store.retention import blocker
    chain = next(c for c in store.chains() if sorted(c.run_ids) == sorted(run_ids))
    hold = blocker(chain, cutoff)
    return None if hold is None else hold.code


def test_a_session_owed_a_message_keeps_the_run(store: Store, clock: FakeClock[int]) -> None:
    token = put_in_state(store, "told", "running")
    store.add_notification("s1", "told", "n", 0, "final", {"message": "hi"}, token=token)
    store.finish("told", token, "completed")
    store.reserve("launch", SOURCE, {}, "s2")
    launch = store.claim_by_id("launch", "runner-a", session="s2").token
    store.fail("launch", launch, "source_changed", "the file changed")  # a follow-up for s2
    clock.advance(DAY)
    assert blocker_code(store, ["told"], clock.now) == "undelivered"
    assert blocker_code(store, ["launch"], clock.now) == "undelivered"
    note_token, notes = store.claim_notifications("s1")
    assert store.mark_notification_delivered(notes[0].id, note_token)
    intent_token, intents = store.claim_turn_intents("s2")
    store.resolve_turn_intent(intents[0].intent_id, intent_token)
    assert sorted(_removable(store, clock.now)) == [["launch"], ["told"]]


def test_remove_chain_deletes_every_row_of_the_chain_and_nothing_else(
        store: Store, clock: FakeClock[int]) -> None:
    token = put_in_state(store, "p", "running")
    store.begin_effect("p", "act", "k", "fp", "a1", token=token)
    store.add_notification("s1", "p", "n", 0, "final", {"message": "x"}, token=token)
    store.finish("p", token, "waiting")
    _settle(store, "c", "completed", parent="p")
    _settle(store, "other", "completed")
    note_token, notes = store.claim_notifications("s1")
    store.mark_notification_delivered(notes[0].id, note_token)
    clock.advance(DAY)
    assert store.remove_chain(["p", "c"], clock.now) is None
    rows = all_rows(store)
    for table in ("workflow_run_queue", "run_events", "workflow_notifications", "effects"):
        assert not [r for r in rows[table] if "p" in r or "c" in r], table
    assert store.get("other") is not None and store.events_since(0, run_id="other")


def test_remove_chain_checks_again_inside_its_transaction(
        store: Store, clock: FakeClock[int]) -> None:
    _settle(store, "p", "waiting")
    _settle(store, "c", "completed", parent="p")
    clock.advance(DAY)
    before = all_rows(store)
    # Planned as one chain; meanwhile a fork of the continuation appeared.
    store.enqueue_detached("fork", SOURCE, {}, parent_run_id="c")
    hold = store.remove_chain(["p", "c"], clock.now)
    assert hold is not None and hold.code == "changed"
    hold = store.remove_chain(["p", "c", "fork"], clock.now)
    assert hold is not None and hold.code == "open"
    after = all_rows(store)
    assert after["workflow_run_queue"][:2] == before["workflow_run_queue"][:2]
    assert store.remove_chain(["p"], clock.now - 2 * DAY) is not None  # nothing is that old


def test_a_session_catching_up_after_a_removal_never_goes_back_or_repeats(
        store: Store, clock: FakeClock[int]) -> None:
    _settle(store, "a", "completed")
    first = store.begin_catch_up("s1")
    store.end_catch_up(first)
    _settle(store, "b", "completed")  # s1 has not seen b yet
    head = store.last_event_seq()
    clock.advance(DAY)
    assert store.remove_chain(["b"], clock.now) is None
    assert store.remove_chain(["a"], clock.now) is None
    assert store.last_event_seq() < head  # the newest events went with their run
    again = store.begin_catch_up("s1")
    assert again.rows == [] and again.head >= first.head
    store.end_catch_up(again)
    assert store.watermark("s1") >= first.head
    _settle(store, "c", "completed")
    assert min(e.seq for e in store.events_since(0, run_id="c")) > head  # seqs are not reused
    later = store.begin_catch_up("s1")
    assert [r.run_id for r in later.rows] == ["c"]
    store.end_catch_up(later)
    assert store.nothing_new("s1")
    fresh = store.begin_catch_up("s2")
    assert fresh.first and fresh.rows == []


def test_a_fork_keeps_its_original_and_a_closed_wait_may_go(
        store: Store, clock: FakeClock[int]) -> None:
    _settle(store, "original", "failed")
    store.enqueue_detached("its-fork", SOURCE, {}, fork=("original", "build"))
    _settle(store, "closed", "waiting")
    store.close_wait("closed")  # `cancel` of the waiting run: its wait is over
    clock.advance(DAY)
    cutoff = clock.now
    # The fork is queued: its original stays with it, as one chain.
    assert blocker_code(store, ["original", "its-fork"], cutoff) == "open"
    assert _removable(store, cutoff) == [["closed"]]
