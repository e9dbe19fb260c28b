"""The catch-up read behind ``sync``: watermarks, the first-sync rule, crash safety."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pi_workflows.protocol.store import Store

from tests.helpers.store import SOURCE, put_in_state

pytestmark = pytest.mark.timeout(30)


def _ids(store: Store, session: str) -> list[str]:
    catch_up = store.begin_catch_up(session)
    store.end_catch_up(catch_up)
    return [r.run_id for r in catch_up.rows]


def test_each_changed_run_appears_once_in_its_latest_state(store: Store) -> None:
    assert _ids(store, "s1") == []  # first sync, empty store
    token = put_in_state(store, "r1", "running")
    store.finish("r1", token, "completed")
    put_in_state(store, "r2", "queued")
    catch_up = store.begin_catch_up("s1")
    assert [(r.run_id, r.state) for r in catch_up.rows] == [("r1", "done"), ("r2", "queued")]
    assert catch_up.head == store.last_event_seq() and not catch_up.first
    store.end_catch_up(catch_up)
    assert _ids(store, "s1") == []  # nothing new
    store.cancel("r2")
    assert _ids(store, "s1") == ["r2"]


def test_the_watermark_moves_before_delivery_and_a_lost_snapshot_is_subsumed(
        store: Store) -> None:
    _ids(store, "s1")
    put_in_state(store, "r1", "queued")
    lost = store.begin_catch_up("s1")  # shown? the process died before end_catch_up
    assert [r.run_id for r in lost.rows] == ["r1"]
    assert store.watermark("s1") == lost.head  # persisted before anything was shown
    put_in_state(store, "r2", "queued")
    again = store.begin_catch_up("s1")
    assert [r.run_id for r in again.rows] == ["r1", "r2"]  # r1 is not lost
    assert again.since == lost.since
    store.end_catch_up(again)
    assert _ids(store, "s1") == []


def test_a_first_sync_that_died_is_still_a_first_sync(store: Store) -> None:
    for i in range(5):
        put_in_state(store, f"old{i}", "queued")  # other people's runs, long ago
    store.reserve("mine", SOURCE, {}, "s1")
    died = store.begin_catch_up("s1")
    assert died.first and [r.run_id for r in died.rows] == ["mine"]
    again = store.begin_catch_up("s1")  # not the whole project's history
    assert again.first and [r.run_id for r in again.rows] == ["mine"]
    store.end_catch_up(again)
    assert not store.begin_catch_up("s1").first


def test_an_idle_session_is_seen_without_a_write(store: Store) -> None:
    assert not store.nothing_new("s1")  # never synced
    _ids(store, "s1")
    assert store.nothing_new("s1")
    put_in_state(store, "r1", "queued")
    assert not store.nothing_new("s1")
    _ids(store, "s1")
    assert store.nothing_new("s1")
    store.add_notification("s1", "r1", "n", 1, "progress", {"message": "hi"})
    assert not store.nothing_new("s1")


def test_the_watermark_never_moves_backwards(store: Store) -> None:
    put_in_state(store, "r1", "queued")
    _ids(store, "s1")
    high = store.watermark("s1")
    assert store.advance_watermark("s1", 0) == high
    assert store.begin_catch_up("s1").head == high


def test_two_sessions_do_not_consume_each_others_catch_up(store: Store) -> None:
    _ids(store, "a")
    _ids(store, "b")
    put_in_state(store, "r1", "queued")
    assert _ids(store, "a") == ["r1"]
    put_in_state(store, "r2", "queued")
    assert _ids(store, "b") == ["r1", "r2"]
    assert _ids(store, "a") == ["r2"]


def test_a_first_sync_shows_own_runs_and_the_projects_parked_and_waiting(
        store: Store) -> None:
    store.reserve("mine", SOURCE, {}, "s1")
    store.enqueue_detached("told", SOURCE, {}, notify_session="s1")
    put_in_state(store, "parked", "parked")
    waiting = put_in_state(store, "waits", "running")
    store.finish("waits", waiting, "waiting")
    answered = put_in_state(store, "answered", "running")
    store.finish("answered", answered, "waiting")
    store.enqueue_detached("answer", SOURCE, "yes", parent_run_id="answered")
    done = put_in_state(store, "other", "running")
    store.finish("other", done, "completed")
    put_in_state(store, "queued-elsewhere", "queued")
    catch_up = store.begin_catch_up("s1")
    assert catch_up.first
    assert sorted(r.run_id for r in catch_up.rows) == ["mine", "parked", "told", "waits"]


def test_a_cancelled_continuation_makes_its_parent_waiting_again(store: Store) -> None:
    token = put_in_state(store, "p", "running")
    store.finish("p", token, "waiting")
    store.enqueue_detached("c", SOURCE, "yes", parent_run_id="p")
    store.cancel("c")
    assert [r.run_id for r in store.begin_catch_up("fresh").rows] == ["p"]


def test_a_bad_session_id_is_refused(make_store: Callable[..., Store]) -> None:
    store = make_store()
    with pytest.raises(Exception, match="invalid session id"):
        store.begin_catch_up("../etc")


def test_waiting_runs_are_the_unanswered_checkpoints(store: Store) -> None:
    for run_id, status in (("w1", "waiting"), ("c1", "completed"), ("w2", "waiting")):
        token = put_in_state(store, run_id, "running")
        store.finish(run_id, token, status)
    store.enqueue_detached("answer", SOURCE, "yes", parent_run_id="w2")
    assert [r.run_id for r in store.waiting_runs()] == ["w1"]
