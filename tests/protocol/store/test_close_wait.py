"""Cancelling a waiting run closes its wait: no continuation can start after it."""

from __future__ import annotations

import pytest
from pi_workflows.protocol.errors import ConflictError, TransitionRefused
from pi_workflows.protocol.states import seen_status
from pi_workflows.protocol.store import RunSource, Store

from tests.helpers.store import events

pytestmark = pytest.mark.timeout(30)


def _waiting(store: Store, source: RunSource, run_id: str = "parent") -> str:
    claim = store.insert_and_claim(run_id, source, {}, "r1")
    store.mark_running(run_id, claim.token)
    store.finish(run_id, claim.token, "waiting")
    return run_id


def test_close_wait_flags_the_done_row_and_then_refuses_an_answer(
        store: Store, source: RunSource) -> None:
    parent = _waiting(store, source)
    row = store.close_wait(parent)
    assert row.state == "done" and row.cancel_requested and row.error_code == "cancelled"
    assert events(store, parent)[-1].type == "cancelled"
    with pytest.raises(ConflictError) as refused:
        store.enqueue_detached("child", source, {}, parent_run_id=parent)
    assert refused.value.code == "wait_cancelled"
    assert store.get("child") is None
    assert store.close_wait(parent).cancel_requested  # again: a no-op
    assert [e.type for e in events(store, parent)].count("cancelled") == 1


def test_close_wait_refuses_a_parent_that_was_already_answered(
        store: Store, source: RunSource) -> None:
    parent = _waiting(store, source)
    store.enqueue_detached("child", source, {}, parent_run_id=parent)
    with pytest.raises(TransitionRefused, match="child"):
        store.close_wait(parent)
    assert not store.get(parent).cancel_requested  # type: ignore[union-attr]


def test_a_failed_continuation_does_not_keep_the_wait_open(
        store: Store, source: RunSource) -> None:
    parent = _waiting(store, source)
    store.enqueue_detached("child", source, {}, parent_run_id=parent)
    store.cancel("child")  # it frees the one-continuation slot
    assert store.close_wait(parent).cancel_requested


def test_only_a_done_row_has_a_wait_to_close(store: Store, source: RunSource) -> None:
    store.enqueue_detached("queued", source, {})
    with pytest.raises(TransitionRefused, match="not waiting"):
        store.close_wait("queued")


def test_a_closed_wait_reads_cancelled_and_nothing_else_changes() -> None:
    assert seen_status("done", "waiting", True) == "cancelled"
    assert seen_status("done", "waiting", False) == "waiting"
    assert seen_status("done", "completed", True) == "completed"
    assert seen_status("running", "running", True) == "running"
