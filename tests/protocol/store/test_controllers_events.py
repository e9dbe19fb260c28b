"""A reconcile's own events: ``append_controller_event`` is fenced, bounded and redacted."""

from __future__ import annotations

import pytest
from pi_workflows.protocol.errors import ClaimLost, LimitError
from pi_workflows.protocol.store import Store
from pi_workflows.protocol.store.controllers import MAX_EVENTS_PER_RESOURCE, settled

pytestmark = pytest.mark.timeout(30)


def test_an_appended_event_is_fenced_by_the_claim(store: Store) -> None:
    store.apply_spec("files", "a", {})
    claim = store.claim_reconcile(["files"], "host-1", 30_000)
    assert claim is not None
    seq = store.append_controller_event("files", "a", "log", "copied 3 files",
                                        {"level": "info", "data": {"n": 3}}, token=claim.token)
    last = store.resource_events("files", "a")[-1]
    assert (last.seq, last.type, last.message) == (seq, "log", "copied 3 files")
    assert last.data == {"level": "info", "data": {"n": 3}}
    assert last.uid == claim.resource.uid
    assert [e.seq for e in store.controller_events_after(seq - 1, controller="files")] == [seq]
    store.finish_reconcile(claim.token, settled())
    before = store.last_controller_seq()
    with pytest.raises(ClaimLost):
        store.append_controller_event("files", "a", "log", "late", None, token=claim.token)
    assert store.last_controller_seq() == before


def test_bad_types_and_data_are_refused_and_write_nothing(store: Store) -> None:
    store.apply_spec("files", "a", {})
    claim = store.claim_reconcile(["files"], "host-1", 30_000)
    assert claim is not None
    before = store.last_controller_seq()
    for bad in ("settled", "reconcile_started", "Log", "", "x" * 40, "a b"):
        with pytest.raises(LimitError) as info:
            store.append_controller_event("files", "a", bad, "m", None, token=claim.token)
        assert info.value.code == "invalid_event_type"
    with pytest.raises(LimitError):
        store.append_controller_event("files", "a", "log", "m", {"x": "y" * 70_000},
                                      token=claim.token)
    with pytest.raises(LimitError):
        store.append_controller_event("files", "a", "log", "m", ["not", "a", "dict"],  # type: ignore[arg-type]
                                      token=claim.token)
    assert store.last_controller_seq() == before


def test_appended_events_are_redacted_bounded_and_capped(store: Store) -> None:
    store.apply_spec("files", "a", {})
    claim = store.claim_reconcile(["files"], "host-1", 30_000)
    assert claim is not None
    store.append_controller_event("files", "a", "log", "token=sk-abcdefghijklmnopqrstuvwx " +
                                  "z" * 10_000, None, token=claim.token)
    text = store.resource_events("files", "a")[-1].message
    assert "sk-abcdefghijklmnopqrstuvwx" not in text and len(text) < 10_000
    for n in range(MAX_EVENTS_PER_RESOURCE + 10):
        store.append_controller_event("files", "a", "log", f"line {n}", None, token=claim.token)
    every = store.resource_events("files", "a", limit=1000)
    assert len(every) == MAX_EVENTS_PER_RESOURCE
    assert every[-1].message == f"line {MAX_EVENTS_PER_RESOURCE + 9}"
