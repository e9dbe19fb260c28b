"""Controller resources: spec and generation, CAS status writes, finalizers, bounds, events."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pi_workflows.protocol.errors import ClaimLost, ConflictError, LimitError, NotFound
from pi_workflows.protocol.store import Store
from pi_workflows.protocol.store.controllers import (
    MAX_EVENTS_PER_RESOURCE,
    Conflict,
    Deleted,
    Resource,
    settled,
)

from tests.helpers.clocks import FakeClock

pytestmark = pytest.mark.timeout(30)


def _types(store: Store, key: str = "a") -> list[str]:
    return [e.type for e in store.resource_events("files", key)]


def test_apply_creates_then_only_a_changed_spec_moves_generation(store: Store,
                                                                 clock: FakeClock[int]) -> None:
    first = store.apply_spec("files", "a", {"path": "x", "body": "1"},
                             initial_status={"controller_status": {"phase": "new"}})
    assert first.created and first.changed
    res = first.resource
    assert (res.resource_version, res.generation) == (1, 1)
    assert res.uid.startswith("res-") and res.finalizers == () and not res.deletion_requested
    assert res.status["controller_status"] == {"phase": "new"}
    assert res.status["conditions"] == [] and res.status["observed_generation"] is None

    # The same spec (keys in another order: canonical JSON) is a no-op: no event, no move.
    clock.advance(5)
    same = store.apply_spec("files", "a", {"body": "1", "path": "x"})
    assert not same.created and not same.changed and same.resource == res
    assert _types(store) == ["applied"]

    changed = store.apply_spec("files", "a", {"path": "x", "body": "2"})
    assert changed.changed and not changed.created
    assert (changed.resource.resource_version, changed.resource.generation) == (2, 2)
    assert changed.resource.uid == res.uid and changed.resource.created_at == res.created_at

    # A status write moves resource_version, never generation.
    after = store.write_status("files", "a", 2, {"observed_generation": 2})
    assert isinstance(after, Resource)
    assert (after.resource_version, after.generation) == (3, 2)
    assert _types(store) == ["applied", "spec_changed"]
    assert store.queue_entry("files", "a") is not None


def test_a_status_write_that_lost_the_race_is_a_conflict_event_and_a_requeue(
        make_store: Callable[..., Store]) -> None:
    one, two = make_store(), make_store()  # two connections on one real file
    one.apply_spec("files", "a", {"n": 1})
    claim = one.claim_reconcile(["files"], "host-1", 30_000)
    assert claim is not None and claim.resource is not None
    read_at = claim.resource.resource_version
    # Meanwhile the caller changes the spec through the other connection.
    two.apply_spec("files", "a", {"n": 2})
    lost = one.write_status("files", "a", read_at, {"controller_status": {"seen": 1}})
    assert lost == Conflict("files", "a", read_at, read_at + 1)
    res = two.get_resource("files", "a")
    assert res is not None and res.status["controller_status"] is None  # nothing written
    assert res.spec == {"n": 2}  # and the spec write is not lost either
    events = two.resource_events("files", "a")
    assert events[-1].type == "conflict" and events[-1].data["expected"] == read_at
    # The key is being reconciled: it is dirty, so it runs again right after.
    entry = two.queue_entry("files", "a")
    assert entry is not None and entry.state == "active" and entry.dirty
    # The winner's version works.
    won = two.write_status("files", "a", read_at + 1, {"controller_status": {"seen": 2}})
    assert isinstance(won, Resource) and won.status["controller_status"] == {"seen": 2}


def test_finish_with_a_stale_status_becomes_conflict_and_is_due_at_once(
        make_store: Callable[..., Store], clock: FakeClock[int]) -> None:
    one, two = make_store(), make_store()
    one.apply_spec("files", "a", {"n": 1})
    claim = one.claim_reconcile(["files"], "host-1", 30_000)
    assert claim is not None and claim.resource is not None
    two.apply_spec("files", "a", {"n": 2})
    done = one.finish_reconcile(claim.token, settled(),
                                expected_version=claim.resource.resource_version,
                                status_patch={"observed_generation": 1})
    assert done.outcome == "conflict" and done.due_at == clock.now
    res = two.get_resource("files", "a")
    assert res is not None and res.status["observed_generation"] is None
    again = two.claim_reconcile(["files"], "host-2", 30_000)
    assert again is not None and again.resource is not None
    assert again.resource.spec == {"n": 2}


def test_conditions_keep_last_transition_while_their_status_stays(
        store: Store, clock: FakeClock[int]) -> None:
    store.apply_spec("files", "a", {})
    t0 = clock.now
    res = store.write_status("files", "a", 1, {"conditions": [
        {"type": "Ready", "status": "false", "reason": "Pending", "message": "token=abc wait"}]})
    assert isinstance(res, Resource)
    (ready,) = res.status["conditions"]
    assert ready["last_transition"] == t0 and ready["observed_generation"] == 1
    assert ready["message"] == "token=[redacted] wait"
    clock.advance(1_000)
    res = store.write_status("files", "a", 2, {"conditions": [
        {"type": "Ready", "status": "false", "reason": "StillPending"},
        {"type": "Synced", "status": "unknown"}]})
    assert isinstance(res, Resource)
    by_type = {c["type"]: c for c in res.status["conditions"]}
    assert by_type["Ready"]["last_transition"] == t0 and by_type["Ready"]["reason"] == \
        "StillPending"
    assert by_type["Synced"]["last_transition"] == t0 + 1_000
    assert store.count_not_ready("files") == 1
    clock.advance(1_000)
    res = store.write_status("files", "a", 3, {"conditions": [
        {"type": "Ready", "status": "true"}]})
    assert isinstance(res, Resource)
    by_type = {c["type"]: c for c in res.status["conditions"]}
    assert by_type["Ready"]["last_transition"] == t0 + 2_000
    assert store.count_not_ready("files") == 0 and store.count_not_ready() == 0
    # An unchanged status writes nothing.
    same = store.write_status("files", "a", 4, {"conditions": [
        {"type": "Ready", "status": "true"}]})
    assert isinstance(same, Resource) and same.resource_version == 4


@pytest.mark.parametrize(("patch", "needle"), [
    ({"spec": 1}, "may set only"),
    ({"conditions": {"type": "Ready"}}, "must be a list"),
    ({"conditions": [{"type": "Ready", "status": "yes"}]}, "true, false or unknown"),
    ({"conditions": [{"status": "true"}]}, "condition type must be a non-empty string"),
    ({"conditions": [{"type": "Ready", "colour": "red"}]}, "unknown fields"),
    ({"observed_generation": "1"}, "must be an integer"),
    ({"controller_status": "x" * (300 * 1024)}, "the limit is 262144"),
])
def test_bad_status_patches_are_refused_with_a_clear_message(store: Store, patch: object,
                                                             needle: str) -> None:
    store.apply_spec("files", "a", {})
    with pytest.raises(LimitError) as info:
        store.write_status("files", "a", 1, patch)  # type: ignore[arg-type]
    assert needle in info.value.message
    res = store.get_resource("files", "a")
    assert res is not None and res.resource_version == 1


@pytest.mark.parametrize(("controller", "key", "code"), [
    ("Files", "a", "invalid_controller_name"),
    ("1files", "a", "invalid_controller_name"),
    ("files_x", "a", "invalid_controller_name"),
    ("f" * 64, "a", "invalid_controller_name"),
    ("files", "", "invalid_resource_key"),
    ("files", "a\nb", "invalid_resource_key"),
    ("files", "k" * 254, "invalid_resource_key"),
])
def test_names_and_keys_are_bounded(store: Store, controller: str, key: str, code: str) -> None:
    with pytest.raises(LimitError) as info:
        store.apply_spec(controller, key, {})
    assert info.value.code == code
    assert store.list_resources() == []


def test_a_spec_over_256_kib_is_refused_and_not_echoed(store: Store) -> None:
    with pytest.raises(LimitError) as info:
        store.apply_spec("files", "a", {"blob": "s3cret" * 50_000})
    assert info.value.code == "document_too_large" and "256 KiB" in info.value.message
    assert "s3cret" not in info.value.message
    with pytest.raises(LimitError) as bad:
        store.apply_spec("files", "a", {"x": {1, 2}})
    assert bad.value.code == "document_invalid"
    assert store.get_resource("files", "a") is None
    # Exactly at the limit is fine.
    store.apply_spec("files", "b", "x" * (256 * 1024 - 2))


def test_deletion_waits_for_finalizers_then_removes_the_row(store: Store) -> None:
    store.apply_spec("files", "a", {"n": 1})
    claim = store.claim_reconcile(["files"], "host-1", 30_000)
    assert claim is not None
    with_fin = store.add_finalizer("files", "a", "files/cleanup", 1, token=claim.token)
    assert isinstance(with_fin, Resource) and with_fin.finalizers == ("files/cleanup",)
    assert store.add_finalizer("files", "a", "files/cleanup", 2) == with_fin  # a no-op
    store.finish_reconcile(claim.token, settled())
    assert store.queue_entry("files", "a") is None

    marked = store.request_delete("files", "a")
    assert isinstance(marked, Resource) and marked.deletion_requested
    assert marked.generation == 1 and marked.resource_version == 3
    assert store.request_delete("files", "a") == marked  # asking again changes nothing
    with pytest.raises(ConflictError) as refused:
        store.apply_spec("files", "a", {"n": 2})
    assert refused.value.code == "resource_deleting"
    with pytest.raises(ConflictError):
        store.add_finalizer("files", "a", "other", 3)

    claim = store.claim_reconcile(["files"], "host-1", 30_000)
    assert claim is not None and claim.resource is not None
    assert claim.resource.deletion_requested
    # A stale version loses; the right one removes the last finalizer and the row.
    assert isinstance(store.remove_finalizer("files", "a", "files/cleanup", 2,
                                             token=claim.token), Conflict)
    gone = store.remove_finalizer("files", "a", "files/cleanup", 3, token=claim.token)
    assert gone == Deleted("files", "a", marked.uid)
    assert store.get_resource("files", "a") is None
    done = store.finish_reconcile(claim.token, settled())
    assert done.resource is None and done.due_at is None
    assert store.queue_entry("files", "a") is None
    assert _types(store)[-3:] == ["conflict", "finalizer_removed", "deleted"]
    # The key can be applied again: a new uid.
    again = store.apply_spec("files", "a", {"n": 3})
    assert again.created and again.resource.uid != marked.uid


def test_delete_without_finalizers_removes_at_once_and_drops_the_queue_row(store: Store) -> None:
    store.apply_spec("files", "a", {})
    res = store.get_resource("files", "a")
    assert res is not None
    assert store.request_delete("files", "a") == Deleted("files", "a", res.uid)
    assert store.get_resource("files", "a") is None and store.reconcile_queue() == []
    assert store.claim_reconcile(["files"], "host-1", 30_000) is None
    with pytest.raises(NotFound):
        store.request_delete("files", "a")
    with pytest.raises(NotFound):
        store.write_status("files", "a", 1, {})


def test_a_fenced_status_write_with_a_lost_token_writes_nothing(store: Store) -> None:
    store.apply_spec("files", "a", {})
    claim = store.claim_reconcile(["files"], "host-1", 30_000)
    assert claim is not None
    store.finish_reconcile(claim.token, settled())
    with pytest.raises(ClaimLost):
        store.write_status("files", "a", 1, {"observed_generation": 1}, token=claim.token)
    res = store.get_resource("files", "a")
    assert res is not None and res.resource_version == 1


def test_events_are_bounded_per_resource_and_readable_after_a_seq(store: Store) -> None:
    store.apply_spec("files", "a", {"n": 0})
    store.apply_spec("files", "b", {"n": 0})
    for n in range(1, MAX_EVENTS_PER_RESOURCE + 30):
        store.apply_spec("files", "a", {"n": n})
    every = store.resource_events("files", "a", limit=1000)
    assert len(every) == MAX_EVENTS_PER_RESOURCE
    assert every[-1].data == {"generation": MAX_EVENTS_PER_RESOURCE + 30}
    assert [e.type for e in store.resource_events("files", "b")] == ["applied"]  # kept
    last50 = store.resource_events("files", "a")
    assert len(last50) == 50 and last50 == every[-50:]
    mark = every[-3].seq
    after = store.controller_events_after(mark, controller="files", key="a")
    assert [e.seq for e in after] == [e.seq for e in every[-2:]]
    assert store.last_controller_seq() == every[-1].seq
    assert store.controller_events_after(store.last_controller_seq()) == []
