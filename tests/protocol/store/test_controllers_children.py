"""Child runs of reconciles: reservation before the run, one-transaction enqueue, attempts,
and the parent queued again when its child ends."""

from __future__ import annotations

from typing import Any

import pytest
from pi_workflows.protocol.errors import ClaimLost, ConflictError, LimitError, TransitionRefused
from pi_workflows.protocol.store import RunSource, Store
from pi_workflows.protocol.store.controllers import ReconcileClaim, fingerprint, settled
from pi_workflows.protocol.store.retention import blocker

pytestmark = pytest.mark.timeout(30)
INPUT = {"path": "x"}
FP = fingerprint(INPUT)


@pytest.fixture
def claim(store: Store) -> ReconcileClaim:
    store.apply_spec("files", "a", {"n": 1})
    got = store.claim_reconcile(["files"], "host-1", 30_000)
    assert got is not None
    return got


def _start(store: Store, claim: ReconcileClaim, source: RunSource, run_id: str = "child-1",
           **kw: Any):
    return store.start_child("files", "a", "sync", source=source, input_fingerprint=FP,
                             private_input=INPUT, run_id=run_id, token=claim.token, **kw)


def _run_to_end(store: Store, run_id: str, how: str = "done") -> None:
    got = store.claim_by_id(run_id, "host-1")
    store.mark_running(run_id, got.token)
    if how == "done":
        store.finish(run_id, got.token, "completed")
    else:
        store.fail(run_id, got.token, "boom", "it failed")


def test_start_child_saves_the_record_and_queues_the_run_together(
        store: Store, claim: ReconcileClaim, source: RunSource) -> None:
    child, created = _start(store, claim, source)
    assert created and child.attempt == 1 and child.state == "queued"
    assert child.run_state == "queued" and child.run_id == "child-1"
    row = store.get("child-1")
    assert row is not None and row.state == "queued" and row.origin_session is None
    assert row.has_private_input
    # Asking again (the next pass) returns the same attempt; no second run.
    again, created = _start(store, claim, source, run_id="child-2")
    assert not created and again == child and store.get("child-2") is None
    assert store.child_for("files", "a", "sync") == child
    assert store.child_by_run("child-1") == child
    assert store.children_of("files", "a") == [child]
    types = [e.type for e in store.resource_events("files", "a")]
    assert types[-2:] == ["child_reserved", "child_started"]


def test_reserve_first_then_enqueue(store: Store, claim: ReconcileClaim,
                                    source: RunSource) -> None:
    child, created = store.reserve_child("files", "a", "sync", workflow=source.workflow,
                                         input_fingerprint=FP, run_id="child-1",
                                         token=claim.token)
    assert created and child.state == "reserved" and child.run_state is None
    assert store.get("child-1") is None  # the id is saved; the run is not queued yet
    same, created = store.reserve_child("files", "a", "sync", workflow=source.workflow,
                                        input_fingerprint=FP, run_id="child-9",
                                        token=claim.token)
    assert not created and same == child
    queued = store.enqueue_child("child-1", source, INPUT, token=claim.token)
    assert queued.state == "queued" and queued.run_state == "queued"
    with pytest.raises(TransitionRefused) as info:
        store.enqueue_child("child-1", source, INPUT, token=claim.token)
    assert info.value.code == "child_not_reserved"


def test_a_request_key_reused_with_another_input_is_refused(
        store: Store, claim: ReconcileClaim, source: RunSource) -> None:
    _start(store, claim, source)
    with pytest.raises(ConflictError) as info:
        store.start_child("files", "a", "sync", source=source,
                          input_fingerprint=fingerprint({"path": "y"}), private_input={},
                          run_id="child-2", token=claim.token)
    assert info.value.code == "child_request_changed"
    assert store.get("child-2") is None


@pytest.mark.parametrize("where", ["start_child", "enqueue_child"])
def test_a_failure_between_record_and_run_leaves_neither(
        store: Store, claim: ReconcileClaim, source: RunSource,
        monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    if where == "enqueue_child":
        store.reserve_child("files", "a", "sync", workflow=source.workflow,
                            input_fingerprint=FP, run_id="child-1", token=claim.token)
    real = store._ctl_event

    def failing(tx: Any, controller: str, key: str, uid: Any, type_: str, *a: Any) -> int:
        if type_ == "child_started":  # after the run row was inserted in this transaction
            raise OSError("injected failure")
        return real(tx, controller, key, uid, type_, *a)

    monkeypatch.setattr(store, "_ctl_event", failing)
    with pytest.raises(OSError):
        if where == "start_child":
            _start(store, claim, source)
        else:
            store.enqueue_child("child-1", source, INPUT, token=claim.token)
    monkeypatch.undo()
    assert store.get("child-1") is None  # no run
    child = store.child_for("files", "a", "sync")
    if where == "start_child":
        assert child is None  # no record either
    else:
        assert child is not None and child.state == "reserved"  # as it was
    # And it works once nothing fails.
    if where == "start_child":
        child, _ = _start(store, claim, source)
    else:
        child = store.enqueue_child("child-1", source, INPUT, token=claim.token)
    assert child.state == "queued" and store.get("child-1") is not None


def test_a_run_input_too_large_queues_nothing(store: Store, claim: ReconcileClaim,
                                              source: RunSource) -> None:
    with pytest.raises(LimitError):
        store.start_child("files", "a", "sync", source=source, input_fingerprint=FP,
                          private_input={"x": "y" * (1024 * 1024 + 1)}, run_id="child-1",
                          token=claim.token)
    assert store.get("child-1") is None and store.child_for("files", "a", "sync") is None


def test_child_writes_are_fenced(store: Store, claim: ReconcileClaim, source: RunSource) -> None:
    store.finish_reconcile(claim.token, settled())
    with pytest.raises(ClaimLost):
        _start(store, claim, source)
    assert store.get("child-1") is None and store.children_of("files", "a") == []


def test_a_child_ending_queues_its_parent(store: Store, claim: ReconcileClaim,
                                          source: RunSource) -> None:
    _start(store, claim, source)
    store.finish_reconcile(claim.token, settled())
    assert store.queue_entry("files", "a") is None
    mark = store.last_event_seq()
    _run_to_end(store, "child-1")
    entry = store.queue_entry("files", "a")
    assert entry is not None and entry.state == "queued"
    ended = store.resource_events("files", "a")[-1]
    assert ended.type == "child_ended" and ended.data["runState"] == "done"
    (seen,) = store.children_ended_after(mark)
    assert (seen.controller, seen.key, seen.run_id, seen.run_state) == (
        "files", "a", "child-1", "done")
    assert store.children_ended_after(seen.seq) == []
    child = store.child_for("files", "a", "sync")
    assert child is not None and child.run_state == "done"


def test_a_child_ending_while_its_parent_reconciles_makes_it_dirty(
        store: Store, claim: ReconcileClaim, source: RunSource) -> None:
    _start(store, claim, source)
    _run_to_end(store, "child-1", "fail")
    entry = store.queue_entry("files", "a")
    assert entry is not None and entry.state == "active" and entry.dirty
    done = store.finish_reconcile(claim.token, settled())
    assert done.due_at is not None  # runs again to see its child's end


def test_an_interrupted_attempt_is_followed_by_a_new_one(store: Store, claim: ReconcileClaim,
                                                         source: RunSource) -> None:
    first, _ = _start(store, claim, source)
    out = store.mark_child_interrupted("child-1", "its runner died", token=claim.token)
    assert out.state == "interrupted" and out.run_id == "child-1"
    assert store.mark_child_interrupted("child-1", "again") == out  # a no-op
    second, created = _start(store, claim, source, run_id="child-2")
    assert created and second.attempt == 2 and second.run_id == "child-2"
    assert second.state == "queued"
    with pytest.raises(ConflictError) as info:  # a run id is never reused
        store.reserve_child("files", "a", "other", workflow=source.workflow,
                            input_fingerprint=FP, run_id="child-1", token=claim.token)
    assert info.value.code == "run_exists"
    attempts = store.children_of("files", "a")
    assert [(c.attempt, c.run_id, c.state) for c in attempts] == [
        (1, "child-1", "interrupted"), (2, "child-2", "queued")]
    assert attempts[0].created_at == first.created_at  # the old attempt is kept as it was
    assert store.child_for("files", "a", "sync") == second


def test_gc_keeps_a_child_run_while_its_resource_exists(store: Store, claim: ReconcileClaim,
                                                        source: RunSource) -> None:
    _start(store, claim, source)
    store.finish_reconcile(claim.token, settled())
    _run_to_end(store, "child-1")
    far = 10 ** 15
    (chain,) = [c for c in store.chains() if "child-1" in c.run_ids]
    hold = blocker(chain, far)
    assert hold is not None and hold.code == "controller" and "files/a" in hold.detail
    assert store.remove_chain(chain.run_ids, far) == hold
    assert store.get("child-1") is not None
    store.request_delete("files", "a")  # no finalizers: the resource and its records go
    (chain,) = [c for c in store.chains() if "child-1" in c.run_ids]
    assert blocker(chain, far) is None
    assert store.remove_chain(chain.run_ids, far) is None and store.get("child-1") is None


def test_children_by_runs_reads_many_in_one_call(store: Store, claim: ReconcileClaim,
                                                 source: RunSource) -> None:
    child, _ = _start(store, claim, source)
    other, _ = store.start_child("files", "a", "other", source=source, input_fingerprint=FP,
                                 private_input=INPUT, run_id="child-9", token=claim.token)
    many = [f"plain-{n}" for n in range(1200)]  # past one IN (...) batch
    got = store.children_by_runs(["child-1", *many, "child-9", "child-1"])
    assert got == {"child-1": child, "child-9": other}
    assert store.children_by_runs([]) == {}
    with pytest.raises(LimitError):
        store.children_by_runs(["../escape"])
