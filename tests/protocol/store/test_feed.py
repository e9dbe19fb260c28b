"""The run-level feed: watermarks, notifications and turn intents, each exactly once."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pi_workflows.protocol.errors import ConflictError, LimitError, TransitionRefused, UsageError
from pi_workflows.protocol.store import Store, intent_id_for

from tests.helpers import children, processes
from tests.helpers.clocks import FakeClock
from tests.helpers.store import all_rows

# ---- run events and watermarks -----------------------------------------------------


def test_events_are_ordered_and_filterable(store: Store) -> None:
    a = store.append_run_event("r1", "node_started", {"node": "a"})
    b = store.append_run_event("r2", "node_started", {"node": "b"})
    c = store.append_run_event("r1", "node_finished", {"node": "a"})
    assert a < b < c == store.last_event_seq()
    assert [e.seq for e in store.events_since(a)] == [b, c]
    assert [e.type for e in store.events_since(0, run_id="r1")] == ["node_started",
                                                                    "node_finished"]
    assert store.events_since(0, limit=1)[0].payload == {"node": "a"}


def test_watermark_never_moves_backwards(store: Store) -> None:
    assert store.watermark("s1") == 0
    assert store.advance_watermark("s1", 5) == 5
    assert store.advance_watermark("s1", 3) == 3 + 2
    assert store.advance_watermark("s1", 5) == 5
    assert store.advance_watermark("s1", 9) == 9
    assert store.watermark("s1") == 9 and store.watermark("s2") == 0
    with pytest.raises(UsageError):
        store.advance_watermark("s1", -1)
    assert store.watermark("s1") == 9


_sessions = itertools.count()


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(min_value=0, max_value=2**40), max_size=25))
def test_watermark_is_the_running_maximum(store: Store, moves: list[int]) -> None:
    session = f"s-{next(_sessions)}"  # a fresh session per example on the shared store
    high = 0
    for seq in moves:
        high = max(high, seq)
        assert store.advance_watermark(session, seq) == high
        assert store.watermark(session) == high


# ---- notifications ------------------------------------------------------------------


def test_notification_is_idempotent_per_run_node_index(store: Store) -> None:
    assert store.add_notification("s1", "r1", "n1", 0, "progress", {"text": "one"})
    assert not store.add_notification("s1", "r1", "n1", 0, "progress", {"text": "changed"})
    assert store.add_notification("s1", "r1", "n1", 1, "final", {"text": "two"})
    _token, rows = store.claim_notifications("s1")
    assert [(r.idx, r.payload["text"]) for r in rows] == [(0, "one"), (1, "two")]
    with pytest.raises(UsageError):
        store.add_notification("s1", "r1", "n1", 2, "failure", {})  # passive kinds only
    with pytest.raises(LimitError):
        store.add_notification("s1", "r1", "n1", 3, "progress", {"text": "x" * 70_000})


def test_notification_delivered_once_and_stale_claims_refused(store: Store,
                                                              clock: FakeClock[int]) -> None:
    store.add_notification("s1", "r1", "n1", 0, "final", {"done": True})
    first, rows = store.claim_notifications("s1", lease_ms=1000)
    assert len(rows) == 1 and store.claim_notifications("s1")[1] == []  # leased
    clock.advance(1000)  # the first deliverer stalled past its lease
    second, again = store.claim_notifications("s1", lease_ms=1000)
    assert [r.id for r in again] == [rows[0].id]
    assert not store.mark_notification_delivered(rows[0].id, first)
    assert store.mark_notification_delivered(rows[0].id, second)
    assert not store.mark_notification_delivered(rows[0].id, second)  # exactly once
    assert store.claim_notifications("s1")[1] == []
    clock.advance(10_000)
    assert store.claim_notifications("s1")[1] == []  # delivered rows never come back


def test_a_late_mark_counts_while_no_other_deliverer_took_the_row(store: Store,
                                                                   clock: FakeClock[int]) -> None:
    """Shown, then the mark waited past the lease (a busy store): shown once, not again."""
    store.add_notification("s1", "r1", "n1", 0, "final", {"done": True})
    token, rows = store.claim_notifications("s1", lease_ms=1000)
    clock.advance(2500)
    assert store.mark_notification_delivered(rows[0].id, token)
    assert not store.mark_notification_delivered(rows[0].id, token)  # still exactly once
    clock.advance(10_000)
    assert store.claim_notifications("s1")[1] == []


def test_released_notifications_can_be_claimed_again(store: Store) -> None:
    store.add_notification("s1", "r1", "n1", 0, "progress", {})
    token, rows = store.claim_notifications("s1")
    assert store.release_notifications(token) == 1
    other, again = store.claim_notifications("s1")
    assert [r.id for r in again] == [rows[0].id]
    assert not store.mark_notification_delivered(rows[0].id, token)
    assert store.mark_notification_delivered(rows[0].id, other)
    assert store.claim_notifications("s2")[1] == []  # addressed to one session only


@pytest.mark.slow  # a race of real processes
@pytest.mark.timeout(60)
def test_concurrent_deliverers_deliver_each_notification_once(tmp_path: Path) -> None:
    path = tmp_path / "state" / "store.sqlite3"
    with Store(path) as store:
        for run, node, idx in itertools.product(range(6), range(4), range(5)):
            store.add_notification("s1", f"r{run}", f"n{node}", idx, "progress", {"i": idx})
        store.add_notification("s2", "other", "n", 0, "final", {})
    procs_n = 4
    barrier = processes.CTX.Barrier(procs_n + 1)
    outs = [tmp_path / f"notify-{i}.json" for i in range(procs_n)]
    procs = [processes.start(children.deliver_notifications, str(path), "s1", barrier, str(outs[i]),
                          i % 2 == 0) for i in range(procs_n)]
    barrier.wait(timeout=50)
    processes.join_all(procs)
    delivered = [n for out in outs for n in json.loads(out.read_text())["delivered"]]
    assert len(delivered) == 120 and len(set(delivered)) == 120
    rows = all_rows(path)["workflow_notifications"]
    assert sum(1 for r in rows if r[10] is not None) == 120  # delivered_at; s2's row untouched


# ---- turn intents --------------------------------------------------------------------


def test_turn_intent_id_is_deterministic(store: Store) -> None:
    iid = intent_id_for("s1", "r1", "launch_failed", "activation_failed")
    assert iid == intent_id_for("s1", "r1", "launch_failed", "activation_failed")
    assert iid != intent_id_for("s1", "r1", "launch_failed", "workflow_invalid")
    intent, created = store.create_turn_intent("s1", "r1", "launch_failed",
                                               "activation_failed", {"error": "x"})
    assert created and intent.intent_id == iid and intent.state == "pending"
    again, created = store.create_turn_intent("s1", "r1", "launch_failed",
                                              "activation_failed", {"error": "other"})
    assert not created and again == intent


def test_one_pending_intent_per_run_and_session(store: Store) -> None:
    store.create_turn_intent("s1", "r1", "launch_failed", "a", {})
    with pytest.raises(ConflictError) as info:
        store.create_turn_intent("s1", "r1", "launch_failed", "b", {})
    assert info.value.code == "intent_pending"
    store.create_turn_intent("s2", "r1", "launch_failed", "b", {})  # another session
    token, [intent] = store.claim_turn_intents("s1")
    store.resolve_turn_intent(intent.intent_id, token)
    _, created = store.create_turn_intent("s1", "r1", "launch_failed", "b", {})
    assert created  # resolved intents no longer block


def test_turn_intent_resolves_once_and_release_hands_it_back(store: Store,
                                                             clock: FakeClock[int]) -> None:
    intent, _ = store.create_turn_intent("s1", "r1", "launch_failed", "a", {})
    token, claimed = store.claim_turn_intents("s1", lease_ms=1000)
    assert [i.intent_id for i in claimed] == [intent.intent_id]
    assert store.claim_turn_intents("s1")[1] == []
    assert store.release_turn_intent(intent.intent_id, token)
    assert not store.release_turn_intent(intent.intent_id, token)
    with pytest.raises(TransitionRefused):
        store.resolve_turn_intent(intent.intent_id, token)  # released: no longer ours
    token2, _ = store.claim_turn_intents("s1", lease_ms=1000)
    clock.advance(1000)
    with pytest.raises(TransitionRefused):
        store.resolve_turn_intent(intent.intent_id, token2)  # expired
    token3, _ = store.claim_turn_intents("s1", lease_ms=1000)
    store.resolve_turn_intent(intent.intent_id, token3)
    with pytest.raises(TransitionRefused):
        store.resolve_turn_intent(intent.intent_id, token3)
    resolved = store.get_turn_intent(intent.intent_id)
    assert resolved is not None and resolved.state == "resolved"
    assert resolved.resolved_at == clock.now


@pytest.mark.slow  # a race of real processes
@pytest.mark.timeout(60)
def test_concurrent_claimers_resolve_each_intent_once(tmp_path: Path) -> None:
    path = tmp_path / "state" / "store.sqlite3"
    with Store(path) as store:
        ids = [store.create_turn_intent("s1", f"r{i}", "launch_failed", "a", {"i": i})[0]
               .intent_id for i in range(60)]
    procs_n = 4
    barrier = processes.CTX.Barrier(procs_n + 1)
    outs = [tmp_path / f"intents-{i}.json" for i in range(procs_n)]
    procs = [processes.start(children.resolve_intents, str(path), "s1", barrier, str(outs[i]))
             for i in range(procs_n)]
    barrier.wait(timeout=50)
    processes.join_all(procs)
    results = [json.loads(out.read_text()) for out in outs]
    resolved = Counter(i for r in results for i in r["resolved"])
    assert resolved == Counter(ids)
    with Store(path) as store:
        assert all(store.get_turn_intent(i).state == "resolved" for i in ids)  # type: ignore[union-attr]


def test_a_notification_written_with_a_lost_claim_is_refused(store: Store,
                                                              mono: FakeClock[float]) -> None:
    from pi_workflows.protocol.errors import ClaimLost

    from tests.helpers.store import lapse, put_in_state

    token = put_in_state(store, "r1", "running")
    assert store.add_notification("s1", "r1", "n", 1, "progress", {"m": 1}, token=token)
    lapse(store, mono)  # the claim stalls and is taken over: the writer is stale
    store.claim_by_id("r1", "runner-b")
    with pytest.raises(ClaimLost):
        store.add_notification("s1", "r1", "n", 2, "progress", {"m": 2}, token=token)
    _, rows = store.claim_notifications("s1")
    assert [r.idx for r in rows] == [1]
