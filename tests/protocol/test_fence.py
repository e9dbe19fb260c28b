"""The bundle fence with two live runners in two processes."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path

import pytest
from pi_workflows.protocol.errors import ClaimLost
from pi_workflows.protocol.fence import LOCK_NAME, BundleLocked, fenced
from pi_workflows.protocol.store import Store

from tests.helpers import children, processes
from tests.helpers.clocks import FakeClock
from tests.helpers.store import put_in_state

LEASE = 30_000


def _recv(conn: Connection, timeout: float = 30.0) -> object:
    assert conn.poll(timeout), "child did not answer in time"
    return conn.recv()


@contextlib.contextmanager
def new_owner(store: Store, bundle: Path, now: int) -> Iterator[tuple[Connection, str]]:
    """A second live process that takes ``r1`` over at ``now`` and writes once."""
    parent, child = processes.CTX.Pipe()
    proc = processes.start(children.take_over_and_write, str(store.path), str(bundle), "r1", now,
                        child)
    try:
        token = _recv(parent)
        assert isinstance(token, str)
        yield parent, token
        parent.send("exit")
        processes.join_all([proc], timeout_s=30)
    finally:
        processes.reap(proc)


@pytest.mark.timeout(60)
def test_old_owner_writes_nothing_after_losing_the_lease(
        store: Store, clock: FakeClock[int], tmp_path: Path) -> None:
    bundle = tmp_path / "runs" / "r1"
    target = bundle / "state.json"
    old = put_in_state(store, "r1", "running")
    with fenced(store, bundle, "r1", old):
        target.write_text("old-1")

    with new_owner(store, bundle, clock.now + LEASE) as (parent, new):
        assert new != old
        assert target.read_text() == "new-1"  # the new owner wrote
        before = target.stat()

        with pytest.raises(ClaimLost), fenced(store, bundle, "r1", old):
            target.write_text("old-2")  # never reached
        assert target.read_text() == "new-1"
        assert target.stat().st_mtime_ns == before.st_mtime_ns

        parent.send("write")  # the new owner keeps writing, the old one still cannot
        assert _recv(parent) == "written"
        assert target.read_text() == "new-2"
        with pytest.raises(ClaimLost), fenced(store, bundle, "r1", old):
            target.write_text("old-3")
        assert target.read_text() == "new-2"
    row = store.get("r1")
    assert row is not None and row.claim_token == new and row.runner_id == "runner-new"


@pytest.mark.timeout(60)
def test_the_lock_serialises_writers_across_processes(
        store: Store, clock: FakeClock[int], tmp_path: Path) -> None:
    bundle = tmp_path / "runs" / "r1"
    put_in_state(store, "r1", "running")
    with new_owner(store, bundle, clock.now + LEASE) as (parent, new):
        parent.send("hold")
        assert _recv(parent) == "holding"
        with pytest.raises(BundleLocked), fenced(store, bundle, "r1", new, timeout=0.2):
            pass  # the other process is inside the fence
        parent.send("release")
        assert _recv(parent) == "released"
        with fenced(store, bundle, "r1", new, timeout=5):
            (bundle / "state.json").write_text("parent")  # the lock is free again


def test_lock_file_is_private_whatever_the_umask(store: Store, tmp_path: Path) -> None:
    bundle = tmp_path / "runs" / "r1"
    token = put_in_state(store, "r1", "running")
    old_mask = os.umask(0)
    try:
        with fenced(store, bundle, "r1", token):
            pass
    finally:
        os.umask(old_mask)
    assert stat.S_IMODE((bundle / LOCK_NAME).stat().st_mode) == 0o600
    assert stat.S_IMODE(bundle.stat().st_mode) == 0o700


def test_a_claim_past_its_wall_clock_lease_writes_until_it_is_taken_over(
        store: Store, clock: FakeClock[int], tmp_path: Path) -> None:
    """The fence is the token: a wall clock stepped past the lease voids nothing."""
    bundle = tmp_path / "runs" / "r1"
    token = put_in_state(store, "r1", "running")
    clock.advance(3_600_000)
    with fenced(store, bundle, "r1", token):
        (bundle / "state.json").write_text("still mine")
    assert (bundle / "state.json").read_text() == "still mine"
