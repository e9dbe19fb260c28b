"""Taking over a dead runner's claims at once, and never a live runner's."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

import pytest
from pi_workflows.protocol.errors import ClaimLost
from pi_workflows.protocol.liveness import host_name, process_start_time, runner_is_dead
from pi_workflows.protocol.store import RunnerRow, Store

from tests.helpers import children, processes
from tests.helpers.clocks import FakeClock
from tests.helpers.store import SOURCE, events, lapse, where_of

# (run_id, session to claim it as, mark running?)
CLAIMS: list[tuple[str, str | None, bool]] = [
    ("plain-starting", None, False),
    ("plain-running", None, True),
    ("bound-starting", "session-1", False),  # an origin-bound launch
    ("bound-running", "session-2", True),
]


Victim = tuple[BaseProcess, Connection, dict[str, str]]


@pytest.fixture
def victim(store: Store, clock: FakeClock[int]) -> Iterator[Victim]:
    """A real child process registered as runner ``victim`` holding four claims."""
    for run_id, session, _ in CLAIMS:
        if session is None:
            store.enqueue_detached(run_id, SOURCE, {})
        else:
            store.reserve(run_id, SOURCE, {}, session)
    parent, child = processes.CTX.Pipe()
    proc = processes.start(children.hold_claims, where_of(store), "victim", clock.now, CLAIMS,
                           child)
    try:
        assert parent.poll(30), "child did not claim in time"
        tokens = parent.recv()
        yield proc, parent, tokens
    finally:
        processes.reap(proc)


def _runner(store: Store, runner_id: str) -> RunnerRow:
    [row] = [r for r in store.list_runners() if r.runner_id == runner_id]
    return row


@pytest.mark.timeout(60)
def test_kill_9_runner_claims_are_taken_over_at_once(
        store: Store, clock: FakeClock[int],
        victim: Victim) -> None:
    proc, _, tokens = victim
    dead = _runner(store, "victim")
    assert dead.pid == proc.pid and dead.host_name == host_name()
    assert not runner_is_dead(dead.pid, dead.pid_start_time, dead.host_name)
    assert store.claim_next("host") is None  # live leases: nothing to take

    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(30)
    assert proc.exitcode == -signal.SIGKILL
    assert runner_is_dead(dead.pid, dead.pid_start_time, dead.host_name)
    assert store.claim_next("host") is None  # the leases alone have not expired

    taken = store.take_over_runner(dead, "host")  # clock not advanced
    moved = {c.run_id: c for c in taken}
    assert set(moved) == {"plain-starting", "plain-running", "bound-running"}
    for run_id, claim in moved.items():
        row = store.get(run_id)
        assert row is not None and row.runner_id == "host" and row.claim_token == claim.token
        assert row.state == claim.state == ("starting" if "starting" in run_id else "running")
        assert claim.lease_expires_at == clock.now + store.lease_ms
        assert events(store, run_id)[-1].payload["reason"] == "runner_dead"
        with pytest.raises(ClaimLost):
            store.verify(run_id, tokens[run_id])
        store.verify(run_id, claim.token)
    assert "victim" not in {r.runner_id for r in store.list_runners()}

    # A host leaves the origin-bound launch to its session's runner.
    row = store.get("bound-starting")
    assert row is not None and row.claim_token == tokens["bound-starting"]
    [claim] = store.take_over_runner(dead, "session-runner", as_host=False)
    assert claim.run_id == "bound-starting"
    with pytest.raises(ClaimLost):
        store.verify("bound-starting", tokens["bound-starting"])


@pytest.mark.timeout(60)
def test_a_live_runner_is_never_proven_dead(
        store: Store, clock: FakeClock[int],
        victim: Victim) -> None:
    proc, _, tokens = victim
    row = _runner(store, "victim")
    assert proc.is_alive()
    assert not runner_is_dead(row.pid, row.pid_start_time, row.host_name)
    assert not runner_is_dead(os.getpid(), process_start_time(), host_name())
    clock.advance(store.lease_ms - 1)
    assert store.claim_next("host") is None
    for run_id, token in tokens.items():
        current = store.get(run_id)
        assert current is not None and current.claim_token == token


def test_a_reused_pid_counts_as_dead(store: Store) -> None:
    mine = process_start_time()
    for start in (mine + 10.0, mine - 1000.0):
        row = store.register_runner("old", "host", os.getpid(), start, host_name())
        assert runner_is_dead(row.pid, row.pid_start_time, row.host_name)


def test_a_runner_on_another_machine_is_never_proven_dead(store: Store) -> None:
    row = store.register_runner("remote", "host", os.getpid(), 1.0, "elsewhere.invalid")
    assert not runner_is_dead(row.pid, row.pid_start_time, row.host_name)
    assert not runner_is_dead(2**22 + 12345, 1.0, "elsewhere.invalid")  # no such pid here


def test_takeover_never_moves_claims_of_a_restarted_runner_id(
        store: Store, mono: FakeClock[float]) -> None:
    """Regression: claims were moved by runner id even after that id re-registered."""
    old = store.register_runner("r", "host", os.getpid(), 1.0, host_name())
    store.enqueue_detached("x", SOURCE, {})
    store.claim_by_id("x", "r")
    # The same runner id comes back in a live process and claims more work.
    store.register_runner("r", "host", os.getpid(), process_start_time(), host_name())
    store.enqueue_detached("y", SOURCE, {})
    live = store.claim_by_id("y", "r")
    assert runner_is_dead(old.pid, old.pid_start_time, old.host_name)
    assert store.take_over_runner(old, "other") == []
    store.verify("y", live.token)
    assert [r.pid_start_time for r in store.list_runners()] == [process_start_time()]
    lapse(store, mono)  # a lease without progress still frees them
    assert {c.run_id for c in (store.claim_next("other"), store.claim_next("other")) if c} \
        == {"x", "y"}
