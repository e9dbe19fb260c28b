"""The controller work queue: dedup, one claim per key, dirty re-runs, leases, backoff."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from pi_workflows.protocol.errors import ClaimLost, LimitError
from pi_workflows.protocol.store import Gone, Store
from pi_workflows.protocol.store.controllers import (
    BACKOFF_MAX_MS,
    backoff_ms,
    error,
    requeue,
    requeue_after,
    settled,
)

from tests.helpers import ctlchildren, processes
from tests.helpers.clocks import FakeClock

pytestmark = pytest.mark.timeout(30)
LEASE = 30_000


def _claim(store: Store, runner: str = "host-1", lease: int = LEASE):
    return store.claim_reconcile(["files"], runner, lease)


def test_enqueue_deduplicates_and_keeps_the_earliest_due(store: Store,
                                                         clock: FakeClock[int]) -> None:
    store.apply_spec("files", "a", {})  # queued, due now
    assert store.enqueue_reconcile("files", "a") == "kept"
    assert store.enqueue_reconcile("files", "a", delay_s=30) == "kept"
    assert len(store.reconcile_queue()) == 1
    claim = _claim(store)
    assert claim is not None
    store.finish_reconcile(claim.token, requeue_after(60))
    entry = store.queue_entry("files", "a")
    assert entry is not None and entry.due_at == clock.now + 60_000
    assert store.next_reconcile_due(["files"]) == clock.now + 60_000
    assert _claim(store) is None  # not due yet
    assert store.enqueue_reconcile("files", "a", delay_s=10) == "sooner"
    assert store.next_reconcile_due(["files"]) == clock.now + 10_000
    assert store.enqueue_reconcile("files", "a") == "sooner"
    assert store.next_reconcile_due(["other", "files"]) == clock.now
    assert store.next_reconcile_due(["other"]) is None
    assert len(store.reconcile_queue()) == 1
    with pytest.raises(LimitError):
        store.enqueue_reconcile("files", "a", delay_s=-1)
    with pytest.raises(LimitError):
        store.enqueue_reconcile("files", "a", delay_s=float("nan"))


def test_one_reconcile_per_key_and_a_dirty_key_runs_again(store: Store,
                                                          clock: FakeClock[int]) -> None:
    store.apply_spec("files", "a", {})
    clock.advance(1)
    store.apply_spec("files", "b", {})
    first = _claim(store)
    assert first is not None and first.key == "a" and first.attempts == 0
    second = _claim(store, "host-2")
    assert second is not None and second.key == "b"
    assert _claim(store, "host-3") is None  # a is held: never two reconciles of a key
    # A change while a is reconciled: dirty, still one row, not claimable yet.
    store.apply_spec("files", "a", {"n": 2})
    entry = store.queue_entry("files", "a")
    assert entry is not None and entry.state == "active" and entry.dirty
    assert _claim(store, "host-3") is None
    done = store.finish_reconcile(first.token, settled())
    assert done.dirty and done.due_at == clock.now and done.outcome == "settled"
    again = _claim(store, "host-3")
    assert again is not None and again.key == "a" and again.resource is not None
    assert again.resource.generation == 2
    assert store.finish_reconcile(again.token, settled()).due_at is None
    assert store.finish_reconcile(second.token, requeue()).due_at == clock.now
    assert [e.key for e in store.reconcile_queue()] == ["b"]
    # A finished token is spent.
    with pytest.raises(ClaimLost):
        store.finish_reconcile(first.token, settled())
    with pytest.raises(ClaimLost):
        store.renew_reconcile(first.token)


def test_claims_only_the_named_controllers(store: Store) -> None:
    store.apply_spec("files", "a", {})
    store.apply_spec("dirs", "a", {})
    claim = store.claim_reconcile(["dirs"], "host-1", LEASE)
    assert claim is not None and claim.controller == "dirs"
    assert store.claim_reconcile(["dirs"], "host-1", LEASE) is None
    with pytest.raises(LimitError):
        store.claim_reconcile([], "host-1", LEASE)
    with pytest.raises(LimitError):
        store.claim_reconcile(["files"], "host-1", 10)


def test_a_stalled_claim_is_taken_only_after_a_lease_of_the_takers_monotonic_time(
        make_store: Callable[..., Store], clock: FakeClock[int]) -> None:
    holder = make_store(monotonic=FakeClock(10.0))
    taker_mono = FakeClock(500.0)
    taker = make_store(monotonic=taker_mono)
    holder.apply_spec("files", "a", {})
    claim = _claim(holder, "host-1", 1_000)
    assert claim is not None
    # The wall clock jumps an hour: no lease "expires" by it.
    clock.advance(3_600_000)
    assert _claim(taker, "host-2") is None  # first sighting starts the count
    taker_mono.advance(0.9)
    assert _claim(taker, "host-2") is None
    holder.renew_reconcile(claim.token)  # progress
    taker_mono.advance(0.5)
    assert _claim(taker, "host-2") is None  # the renewal restarted the count
    taker_mono.advance(1.0)
    # Watched a lease without progress: abandoned, an error attempt, due after its backoff.
    assert taker.claim_reconcile(["files"], "host-2", LEASE, rand=lambda: 0.5) is None
    entry = taker.queue_entry("files", "a")
    assert entry is not None and entry.state == "queued" and entry.attempts == 1
    assert entry.due_at == clock.now + backoff_ms(1, lambda: 0.5)
    assert "abandoned" in (entry.last_error or "")
    clock.advance(backoff_ms(1, lambda: 0.5))
    taken = _claim(taker, "host-2")
    assert taken is not None and taken.key == "a" and taken.attempts == 1
    assert taken.token != claim.token
    # The old holder's token fails every write; nothing it does lands.
    with pytest.raises(ClaimLost):
        holder.renew_reconcile(claim.token)
    with pytest.raises(ClaimLost):
        holder.finish_reconcile(claim.token, settled(), expected_version=1,
                                status_patch={"observed_generation": 1})
    res = taker.get_resource("files", "a")
    assert res is not None and res.status["observed_generation"] is None
    abandoned = [e for e in taker.resource_events("files", "a") if e.type == "error"]
    assert abandoned[-1].data["reason"] == "lease_expired"
    assert abandoned[-1].data["runnerId"] == "host-1"
    assert taker.finish_reconcile(taken.token, settled()).due_at is None


def test_a_dead_runners_reconciles_return_at_once_on_proof(make_store: Callable[..., Store],
                                                          clock: FakeClock[int]) -> None:
    store = make_store()
    store.apply_spec("files", "a", {})
    store.apply_spec("files", "b", {})
    one, two = _claim(store, "host-dead"), _claim(store, "host-dead")
    assert one is not None and two is not None
    # A live runner registered under that id: the proof does not hold.
    store.register_runner("host-dead", "host", 4242, 1.5, "here")
    assert store.release_reconciles(Gone("host-dead")) == 0
    assert store.release_reconciles(Gone("host-dead", 4242, 1.5), rand=lambda: 0.0) == 2
    assert {(e.key, e.state, e.attempts) for e in store.reconcile_queue()} == {
        ("a", "queued", 1), ("b", "queued", 1)}
    # Its host died, not the reconcile: the first such attempt is due at once.
    fresh = _claim(store, "host-new")
    assert fresh is not None and fresh.attempts == 1
    assert store.resource_events("files", fresh.key)[-2].data["reason"] == "runner_dead"
    with pytest.raises(ClaimLost):
        store.finish_reconcile(one.token, settled())


def test_a_failing_key_whose_runner_died_still_backs_off(make_store: Callable[..., Store],
                                                          clock: FakeClock[int]) -> None:
    store = make_store()
    store.apply_spec("files", "a", {})
    first = _claim(store, "host-old")
    assert first is not None
    store.finish_reconcile(first.token, error("boom"))
    clock.advance(backoff_ms(1, lambda: 1.0))
    again = _claim(store, "host-dead")
    assert again is not None and again.attempts == 1
    assert store.release_reconciles(Gone("host-dead"), rand=lambda: 0.0) == 1
    assert _claim(store, "host-new") is None  # already failing: a dead host adds a backoff
    clock.advance(backoff_ms(2, lambda: 0.0))
    fresh = _claim(store, "host-new")
    assert fresh is not None and fresh.attempts == 2


@pytest.mark.parametrize(("attempts", "expected_ms"), [
    (1, 1_000), (2, 2_000), (3, 4_000), (4, 8_000), (6, 32_000), (7, 60_000), (40, 60_000)])
def test_backoff_doubles_from_one_second_to_sixty(attempts: int, expected_ms: int) -> None:
    assert backoff_ms(attempts, lambda: 0.5) == expected_ms
    assert backoff_ms(attempts, lambda: 0.0) == int(expected_ms * 0.8)
    top = min(60_000, int(expected_ms * 1.2))
    assert top - 1 <= backoff_ms(attempts, lambda: 0.999999) <= top


def test_errors_back_off_with_seeded_jitter_and_success_resets(store: Store,
                                                               clock: FakeClock[int]) -> None:
    store.apply_spec("files", "a", {})
    jitter, replay = random.Random(24), random.Random(24)
    for attempt in range(1, 10):
        claim = _claim(store)
        assert claim is not None and claim.attempts == attempt - 1
        done = store.finish_reconcile(claim.token, error(f"boom {attempt} api_key=zzz"),
                                      rand=jitter.random)
        wait = done.due_at - clock.now  # type: ignore[operator]
        assert wait == backoff_ms(attempt, replay.random)
        assert 0.8 * min(2 ** (attempt - 1), 60) * 1000 <= wait <= 60_000
        assert done.attempts == attempt
        entry = store.queue_entry("files", "a")
        assert entry is not None and entry.last_error == f"boom {attempt} api_key=[redacted]"
        assert _claim(store) is None  # not due before its backoff
        clock.advance(wait)
    claim = _claim(store)
    assert claim is not None and claim.attempts == 9
    done = store.finish_reconcile(claim.token, requeue())
    assert done.attempts == 0
    last = store.resource_events("files", "a")[-3]
    assert last.type == "error" and "zzz" not in (last.message or "")


def test_lease_expiry_returns_the_key_when_the_holder_died_silently(
        make_store: Callable[..., Store], clock: FakeClock[int]) -> None:
    """A host killed -9 mid-reconcile: another host gets the key after one lease."""
    dead = make_store()
    dead.apply_spec("files", "a", {})
    claim = _claim(dead, "host-1", 2_000)
    assert claim is not None
    dead.close()  # it never renews again
    heir_mono = FakeClock(0.0)
    heir = make_store(monotonic=heir_mono)
    assert _claim(heir, "host-2") is None
    heir_mono.advance(1.9)
    assert _claim(heir, "host-2") is None
    heir_mono.advance(0.1)
    assert _claim(heir, "host-2") is None  # abandoned: an error attempt, backed off
    clock.advance(BACKOFF_MAX_MS)
    back = _claim(heir, "host-2")
    assert back is not None and back.key == "a" and back.attempts == 1


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_processes_racing_never_reconcile_one_key_twice_at_once(tmp_path: Path) -> None:
    path = tmp_path / "state" / "store.sqlite3"
    keys, procs_n = 40, 4
    with Store(path) as store:
        for i in range(keys):
            store.apply_spec("files", f"k{i:03d}", {"i": i})
    marks = tmp_path / "marks"
    marks.mkdir()
    barrier = processes.CTX.Barrier(procs_n + 1)
    outs = [tmp_path / f"out-{i}.json" for i in range(procs_n)]
    procs = [processes.start(ctlchildren.race_reconciles, str(path), f"host-{i}", barrier,
                             str(marks), str(outs[i]), keys, 30) for i in range(procs_n)]
    barrier.wait(timeout=60)
    processes.join_all(procs, timeout_s=80)
    results = [json.loads(out.read_text()) for out in outs]
    got = [tuple(x) for r in results for x in r["got"]]
    queued = Counter(how for r in results for how in r["queued"])
    counts = Counter(key for key, _ in got)
    assert sorted(counts) == [f"k{i:03d}" for i in range(keys)]  # every key reconciled
    assert len({token for _, token in got}) == len(got)  # each claim its own token
    # Exactly one more reconcile per key queued anew or marked dirty; none for a
    # key already queued (dedup): nothing lost, nothing run twice for one request.
    assert len(got) == keys + queued["added"] + queued["dirty"], queued
    with Store(path) as store:
        assert store.reconcile_queue() == []  # nothing lost, nothing left
        starts = sum(1 for i in range(keys) for e in store.resource_events(
            "files", f"k{i:03d}", limit=1000) if e.type == "reconcile_started")
        assert starts == len(got)


@pytest.mark.timeout(60)
def test_a_host_killed_mid_reconcile_loses_nothing(tmp_path: Path) -> None:
    """kill -9 of the holder: another process gets the key a lease of its own time later."""
    path = tmp_path / "state" / "store.sqlite3"
    with Store(path) as store:
        store.apply_spec("files", "a", {"n": 1})
    proc, conn = processes.start_with_pipe(ctlchildren.hold_reconcile, str(path), 300)
    try:
        token = processes.recv(conn)
        proc.kill()
        proc.join(10)
        with Store(path) as heir:
            first_look = time.monotonic()
            deadline = first_look + 20
            while (got := heir.claim_reconcile(["files"], "host-heir", 30_000)) is None:
                assert time.monotonic() < deadline, "the key never came back"
                time.sleep(0.02)  # a host's pass interval: each claim call is one look
            waited = time.monotonic() - first_look
            assert got.key == "a" and got.attempts == 1 and got.token != token
            # Never before a whole lease of the heir's own clock, then its backoff (>= 0.8 s).
            assert waited >= 0.3 + 0.8
            with pytest.raises(ClaimLost):
                heir.finish_reconcile(token, settled())
            assert heir.finish_reconcile(got.token, settled()).due_at is None
    finally:
        processes.reap(proc)


def test_a_busy_host_keeps_watching_so_a_stalled_claim_is_due_on_time(
        make_store: Callable[..., Store], clock: FakeClock[int]) -> None:
    holder = make_store(monotonic=FakeClock(0.0))
    taker_mono = FakeClock(0.0)
    taker = make_store(monotonic=taker_mono)
    holder.apply_spec("files", "a", {})
    claim = _claim(holder, "host-1", 1_000)
    assert claim is not None
    taker.watch_reconciles()  # all its slots busy: it only looks
    assert taker.next_reconcile_due(["files"]) is None  # an active key is not "due"
    taker_mono.advance(1.0)
    # A lease after it first looked, no later: abandoned, due after its backoff.
    assert _claim(taker, "host-2") is None
    due = taker.next_reconcile_due(["files"])
    assert due is not None and due >= clock.now + backoff_ms(1, lambda: 0.0)
    clock.advance(BACKOFF_MAX_MS)
    taken = _claim(taker, "host-2")
    assert taken is not None and taken.attempts == 1


def test_a_reconcile_abandoned_again_and_again_backs_off_ever_longer(
        make_store: Callable[..., Store], clock: FakeClock[int]) -> None:
    """A reconcile that always kills its worker: every takeover is an error attempt."""
    mono = FakeClock(0.0)
    store = make_store(monotonic=mono)
    store.apply_spec("files", "a", {})
    waits = []
    for attempt in range(1, 6):
        claim = store.claim_reconcile(["files"], "host-1", 1_000, rand=lambda: 0.5)
        assert claim is not None and claim.attempts == attempt - 1
        assert store.claim_reconcile(["files"], "host-1", 1_000) is None  # first sighting
        mono.advance(1.0)  # its worker died: no renewal for a lease
        assert store.claim_reconcile(["files"], "host-1", 1_000, rand=lambda: 0.5) is None
        entry = store.queue_entry("files", "a")
        assert entry is not None and entry.attempts == attempt
        waits.append(entry.due_at - clock.now)
        clock.advance(entry.due_at - clock.now)
    assert waits == [backoff_ms(n, lambda: 0.5) for n in range(1, 6)]
    assert waits == [1_000, 2_000, 4_000, 8_000, 16_000]
    # A pass that ends well resets the count.
    claim = store.claim_reconcile(["files"], "host-1", 1_000)
    assert claim is not None and claim.attempts == 5
    assert store.finish_reconcile(claim.token, requeue()).attempts == 0
