"""Guarded effects: pending -> applied | rejected | indeterminate (-> pending)."""

from __future__ import annotations

import pytest
from pi_workflows.protocol.errors import ClaimLost, ConflictError, LimitError, TransitionRefused
from pi_workflows.protocol.store import Store

from tests.helpers.clocks import FakeClock
from tests.helpers.store import lapse, put_in_state

KEY = ("r1", "send-mail", "mail-1")


def _begin(store: Store, fingerprint: str = "fp-1", attempt: str = "a1",
           token: str | None = None) -> tuple[str, bool]:
    effect, created = store.begin_effect(*KEY, fingerprint, attempt, token=token)
    return effect.state, created


def test_begin_records_pending_once(store: Store) -> None:
    assert _begin(store) == ("pending", True)
    assert _begin(store, attempt="a2") == ("pending", False)  # returned unchanged
    effect = store.get_effect(*KEY)
    assert effect is not None and effect.attempt_id == "a1" and effect.result is None


def test_apply_stores_the_result_and_is_final(store: Store) -> None:
    _begin(store)
    applied = store.apply_effect(*KEY, {"messageId": 42})
    assert applied.state == "applied" and applied.result == {"messageId": 42}
    for attempt in (lambda: store.apply_effect(*KEY, {"messageId": 43}),
                    lambda: store.reject_effect(*KEY, {"error": "x"}),
                    lambda: store.mark_effect_indeterminate(*KEY),
                    lambda: store.retry_effect(*KEY, "a2")):
        with pytest.raises(TransitionRefused):
            attempt()
    assert store.get_effect(*KEY) == applied
    effect, created = store.begin_effect(*KEY, "fp-1", "a9")  # a resumed run replays it
    assert not created and effect == applied


def test_reject_is_final(store: Store) -> None:
    _begin(store)
    rejected = store.reject_effect(*KEY, {"status": 400})
    assert rejected.state == "rejected" and rejected.result == {"status": 400}
    with pytest.raises(TransitionRefused):
        store.apply_effect(*KEY, {"ok": True})
    assert store.get_effect(*KEY) == rejected


def test_indeterminate_then_retry_then_apply(store: Store, clock: FakeClock[int]) -> None:
    _begin(store)
    assert store.mark_effect_indeterminate(*KEY).state == "indeterminate"
    with pytest.raises(TransitionRefused):
        store.apply_effect(*KEY, {})  # must be retried (pending) first
    clock.advance(10)
    retried = store.retry_effect(*KEY, "a2")
    assert (retried.state, retried.attempt_id, retried.updated_at) == ("pending", "a2", clock.now)
    assert store.apply_effect(*KEY, {"n": 1}).state == "applied"


def test_settling_an_unknown_effect_is_refused(store: Store) -> None:
    with pytest.raises(TransitionRefused):
        store.apply_effect("r1", "n", "never-begun", {})
    assert store.get_effect("r1", "n", "never-begun") is None


def test_fingerprint_conflict(store: Store) -> None:
    _begin(store)
    store.apply_effect(*KEY, {"ok": 1})
    with pytest.raises(ConflictError) as info:
        _begin(store, fingerprint="fp-2")
    assert info.value.code == "effect_conflict"
    effect = store.get_effect(*KEY)
    assert effect is not None and effect.fingerprint == "fp-1" and effect.state == "applied"


def test_effect_result_is_bounded(store: Store) -> None:
    _begin(store)
    with pytest.raises(LimitError):
        store.apply_effect(*KEY, {"blob": "x" * 70_000})
    effect = store.get_effect(*KEY)
    assert effect is not None and effect.state == "pending"


def test_fenced_effect_writes_need_the_live_claim(store: Store, mono: FakeClock[float]) -> None:
    old = put_in_state(store, "r1", "running")
    assert _begin(store, token=old) == ("pending", True)
    lapse(store, mono)
    new = store.claim_by_id("r1", "runner-b")
    for attempt in (lambda: store.apply_effect(*KEY, {"late": True}, token=old),
                    lambda: store.reject_effect(*KEY, {}, token=old),
                    lambda: store.mark_effect_indeterminate(*KEY, token=old),
                    lambda: store.begin_effect("r1", "send-mail", "mail-2", "fp", "a",
                                               token=old)):
        with pytest.raises(ClaimLost):
            attempt()
    assert store.get_effect("r1", "send-mail", "mail-2") is None
    effect = store.get_effect(*KEY)
    assert effect is not None and effect.state == "pending"
    assert store.apply_effect(*KEY, {"ok": 1}, token=new.token).state == "applied"
    assert [e.effect_key for e in store.list_effects("r1")] == ["mail-1"]
