"""Reconcile effects: every branch of reserve and mark, fenced by the reconcile claim."""

from __future__ import annotations

import pytest
from pi_workflows.protocol.errors import ClaimLost, ConflictError, LimitError, TransitionRefused
from pi_workflows.protocol.store import Store
from pi_workflows.protocol.store.controllers import ReconcileClaim, fingerprint, settled

pytestmark = pytest.mark.timeout(30)
REQ = {"cmd": ["touch", "x"]}


@pytest.fixture
def claim(store: Store) -> ReconcileClaim:
    store.apply_spec("files", "a", {"n": 1})
    got = store.claim_reconcile(["files"], "host-1", 30_000)
    assert got is not None
    return got


def _reserve(store: Store, claim: ReconcileClaim, *, key: str = "write-1", kind: str = "shell",
             request: object = REQ, generation: int = 1):
    return store.reserve_reconcile_effect("files", "a", key, kind=kind,
                                          fingerprint=fingerprint(request),
                                          generation=generation, token=claim.token)


def test_fingerprint_is_sha256_of_canonical_json() -> None:
    assert fingerprint({"b": 1, "a": [1, "é"]}) == fingerprint({"a": [1, "é"], "b": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})
    assert len(fingerprint(None)) == 64
    with pytest.raises(LimitError):
        fingerprint({"x": object()})


def test_reserve_then_applied_is_final_and_replayed(store: Store, claim: ReconcileClaim) -> None:
    effect, created = _reserve(store, claim)
    assert created and effect.state == "pending" and effect.generation == 1
    again, created = _reserve(store, claim)
    assert not created and again == effect  # a pending record from a crashed pass
    done = store.mark_reconcile_effect_applied("files", "a", "write-1", {"ok": True},
                                               token=claim.token)
    assert done.state == "applied" and done.result == {"ok": True}
    replay, created = _reserve(store, claim)
    assert not created and replay.state == "applied" and replay.result == {"ok": True}
    for mark in (store.mark_reconcile_effect_applied, store.mark_reconcile_effect_rejected):
        with pytest.raises(TransitionRefused) as info:
            mark("files", "a", "write-1", None, token=claim.token)
        assert info.value.code == "effect_settled"
    with pytest.raises(TransitionRefused):
        store.mark_reconcile_effect_indeterminate("files", "a", "write-1", token=claim.token)
    types = [e.type for e in store.resource_events("files", "a")]
    assert types[-2:] == ["effect_reserved", "effect_applied"]
    assert store.reconcile_effects("files", "a") == [replay]


@pytest.mark.parametrize(("to", "final"), [("rejected", True), ("indeterminate", True)])
def test_rejected_and_indeterminate_stay(store: Store, claim: ReconcileClaim, to: str,
                                         final: bool) -> None:
    _reserve(store, claim)
    mark = {"rejected": store.mark_reconcile_effect_rejected,
            "indeterminate": store.mark_reconcile_effect_indeterminate}[to]
    out = mark("files", "a", "write-1", {"why": "no"}, token=claim.token)
    assert out.state == to and out.result == {"why": "no"}
    replay, created = _reserve(store, claim)
    assert not created and replay.state == to
    with pytest.raises(TransitionRefused):
        store.mark_reconcile_effect_applied("files", "a", "write-1", None, token=claim.token)
    got = store.get_reconcile_effect("files", "a", "write-1")
    assert got is not None and got.state == to


@pytest.mark.parametrize(("change", "code"), [
    ({"request": {"cmd": ["rm", "x"]}}, "effect_request_changed"),
    ({"generation": 2}, "effect_generation_changed"),
    ({"kind": "http"}, "effect_kind_changed"),
])
def test_a_key_reused_for_another_request_generation_or_kind_is_refused(
        store: Store, claim: ReconcileClaim, change: dict, code: str) -> None:
    first, _ = _reserve(store, claim)
    with pytest.raises(ConflictError) as info:
        _reserve(store, claim, **change)
    assert info.value.code == code and "write-1" in info.value.message
    assert store.get_reconcile_effect("files", "a", "write-1") == first  # unchanged


def test_marking_an_unreserved_effect_is_refused(store: Store, claim: ReconcileClaim) -> None:
    with pytest.raises(TransitionRefused) as info:
        store.mark_reconcile_effect_applied("files", "a", "never", None, token=claim.token)
    assert info.value.code == "effect_not_reserved"
    assert store.reconcile_effects("files", "a") == []


def test_every_effect_write_is_fenced_by_the_claim(store: Store, claim: ReconcileClaim) -> None:
    _reserve(store, claim)
    store.finish_reconcile(claim.token, settled())
    with pytest.raises(ClaimLost):
        _reserve(store, claim, key="write-2")
    with pytest.raises(ClaimLost):
        store.mark_reconcile_effect_applied("files", "a", "write-1", {"ok": 1}, token=claim.token)
    got = store.get_reconcile_effect("files", "a", "write-1")
    assert got is not None and got.state == "pending"
    assert store.get_reconcile_effect("files", "a", "write-2") is None


def test_an_effect_result_is_bounded(store: Store, claim: ReconcileClaim) -> None:
    _reserve(store, claim)
    with pytest.raises(LimitError) as info:
        store.mark_reconcile_effect_applied("files", "a", "write-1", "x" * (300 * 1024),
                                            token=claim.token)
    assert info.value.code == "document_too_large"
    got = store.get_reconcile_effect("files", "a", "write-1")
    assert got is not None and got.state == "pending"


def test_effects_go_with_their_deleted_resource(store: Store, claim: ReconcileClaim) -> None:
    _reserve(store, claim)
    store.finish_reconcile(claim.token, settled())
    store.request_delete("files", "a")
    assert store.reconcile_effects("files", "a") == []
