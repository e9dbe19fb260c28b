"""Wall-clock steps (an NTP step, a VM resumed) against claims, with injected clocks.

The holder and an observer share one wall clock, which steps an hour
forward or back, while each has its own monotonic clock running normally:
a live claim is neither voided nor taken, and a stalled or dead holder's
claim is still recovered, on time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from pi_workflows.protocol.errors import ClaimLost, TransitionRefused
from pi_workflows.protocol.fence import fenced
from pi_workflows.protocol.liveness import host_name, process_start_time
from pi_workflows.protocol.store import Gone, Store

from tests.helpers.clocks import FakeClock
from tests.helpers.store import SOURCE, put_in_state

HOUR_MS = 3_600_000
LEASE_MS = 30_000
RENEW_S = 10.0
STEPS = pytest.mark.parametrize("step_ms", [HOUR_MS, -HOUR_MS], ids=["forward", "back"])


class Observer:
    """Another runner: its own store connection and monotonic clock, the same wall clock."""

    def __init__(self, make_store: Callable[..., Store]) -> None:
        self.mono = FakeClock(50_000.0)
        self.store = make_store(monotonic=self.mono)


def _pass(holder: Store, token: str, observer: Observer, wall: FakeClock[int],
          mono: FakeClock[float], seconds: float) -> None:
    """``seconds`` of real time: the holder renews every RENEW_S, the observer
    looks every second and would claim anything it may take."""
    for tick in range(int(seconds)):
        for clock in (mono, observer.mono):
            clock.advance(1.0)
        wall.advance(1_000)
        if tick % int(RENEW_S) == int(RENEW_S) - 1:
            holder.renew("r1", token)
        assert observer.store.claim_next("other-host") is None


@STEPS
def test_a_live_claim_survives_a_step(make_store: Callable[..., Store], store: Store,
                                      clock: FakeClock[int], mono: FakeClock[float],
                                      tmp_path: Path, step_ms: int) -> None:
    token = put_in_state(store, "r1", "running")
    observer = Observer(make_store)
    _pass(store, token, observer, clock, mono, 25)
    clock.advance(step_ms)
    # The holder's renewal, fence and writes go on, whatever the wall clock did.
    renewal = store.renew("r1", token)
    with fenced(store, tmp_path / "r1", "r1", token):
        (tmp_path / "r1" / "state.json").write_text("mine")
    _pass(store, token, observer, clock, mono, 4 * LEASE_MS / 1000)  # four leases
    row = store.get("r1")
    assert row is not None and row.claim_token == token
    assert (row.lease_expires_at or 0) > renewal.lease_expires_at  # each renewal raised it
    with pytest.raises(TransitionRefused):
        observer.store.claim_by_id("r1", "other-session")
    store.finish("r1", token)


@pytest.mark.parametrize("step_ms", [HOUR_MS, -HOUR_MS, 0], ids=["forward", "back", "none"])
def test_a_stalled_claim_is_taken_after_a_lease_of_the_observers_time(
        make_store: Callable[..., Store], store: Store, clock: FakeClock[int],
        mono: FakeClock[float], step_ms: int) -> None:
    token = put_in_state(store, "r1", "running")
    observer = Observer(make_store)
    _pass(store, token, observer, clock, mono, 2 * RENEW_S)  # renewed as it ends
    clock.advance(step_ms)  # and the holder stops (SIGSTOP, a hang) from here
    observer.mono.advance(LEASE_MS / 1000 - 0.001)
    assert observer.store.claim_next("other-host") is None  # not a whole lease yet
    observer.mono.advance(0.001)
    taken = observer.store.claim_next("other-host")
    assert taken is not None and taken.run_id == "r1" and taken.token != token
    with pytest.raises(ClaimLost):
        store.renew("r1", token)  # the stalled holder, woken, is fenced out


@STEPS
def test_a_dead_holder_is_recovered_at_once_on_proof(
        make_store: Callable[..., Store], store: Store, clock: FakeClock[int],
        step_ms: int) -> None:
    dead = store.register_runner("gone-host", "host", os.getpid(), process_start_time() + 5,
                                 host_name())
    store.enqueue_detached("r1", SOURCE, {})
    held = store.claim_by_id("r1", "gone-host")
    clock.advance(step_ms)
    observer = Observer(make_store)
    with pytest.raises(TransitionRefused):
        observer.store.claim_by_id("r1", "other")  # no proof, never watched: not taken
    taken = observer.store.claim_by_id("r1", "other",
                                       gone=Gone(dead.runner_id, dead.pid, dead.pid_start_time))
    assert taken.token != held.token


def test_a_proof_that_no_longer_holds_takes_nothing(make_store: Callable[..., Store],
                                                    store: Store) -> None:
    store.enqueue_detached("r1", SOURCE, {})
    held = store.claim_by_id("r1", "session-x")
    proof = Gone("session-x")  # no runner row when looked at
    store.register_runner("session-x", "session", os.getpid(), process_start_time(), host_name())
    with pytest.raises(TransitionRefused):
        make_store().claim_by_id("r1", "other", gone=proof)
    store.verify("r1", held.token)


def test_renewals_raise_the_lease_after_a_backward_step(store: Store,
                                                        clock: FakeClock[int]) -> None:
    token = put_in_state(store, "r1", "running")
    first = store.renew("r1", token).lease_expires_at
    clock.advance(-HOUR_MS)
    second = store.renew("r1", token).lease_expires_at
    third = store.renew("r1", token).lease_expires_at
    assert first < second < third  # every renewal is a change an observer sees


@STEPS
def test_a_dead_activators_launch_goes_back_to_queued_at_once_on_proof(
        make_store: Callable[..., Store], store: Store, clock: FakeClock[int],
        step_ms: int) -> None:
    store.reserve("r1", SOURCE, {"in": 1}, "s1")
    store.claim_by_id("r1", "session-dead", session="s1")  # it never registered: gone
    clock.advance(step_ms)
    fresh = make_store()
    with pytest.raises(TransitionRefused):
        fresh.requeue_expired_starting("r1")  # no proof, and nothing watched yet
    row = fresh.requeue_expired_starting("r1", gone=Gone("session-dead"))
    assert row.state == "queued" and row.has_private_input
