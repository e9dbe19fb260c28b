"""Child-process bodies for the multi-process tests (spawn-safe, top level).

Owns what a spawned child runs: a ``Store`` of its own on the shared file,
registered as a runner when the test must prove it dead after ``kill -9``,
talking to the test through a pipe or a JSON file. The plumbing (start,
receive, join, kill) is ``tests.helpers.processes``. Nothing here sleeps to
synchronise. Imports ``pi_workflows`` and ``tests.helpers`` modules only;
never pytest, a conftest or a test module (a spawned child imports this).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from pi_workflows.protocol.errors import ClaimLost, TransitionRefused
from pi_workflows.protocol.fence import fenced
from pi_workflows.protocol.liveness import host_name, process_start_time
from pi_workflows.protocol.store import Claim
from pi_workflows.worker.engine import Engine
from pi_workflows.worker.runner import execute_claim

from .clocks import FakeClock
from .store import SOURCE, child_store
from .waiting import wait_for

# ---- the engine: a runner in a process of its own ----------------------------------


def take_over_later(store_path: str, runs: str, project: str, run_id: str,
                    conn: Connection) -> None:
    """The new owner: once told, claim ``run_id`` as soon as it watched the old claim
    go a lease (1 s, the harness's) unrenewed; hold it; run it to the end when told to.

    Nobody watches its own claim, so it holds however long the test takes.
    """
    with child_store(store_path, lease_ms=1_000) as store:
        conn.send("ready")
        assert conn.recv() == "take"

        def claimed() -> Claim | None:
            try:
                return store.claim_by_id(run_id, "runner-new")
            except TransitionRefused:
                return None  # not watched unrenewed for a lease yet

        claim: Claim = wait_for(claimed, 30, what="the old lease to run out", interval=0.01)
        conn.send(claim.token)
        assert conn.recv() == "run"
        out = execute_claim(store, claim, runs_dir=Path(runs), project_dir=Path(project),
                            fsync="never")
        conn.send(out.outcome)
        conn.recv()


def _block_after(engine: Engine, conn: Connection, event_type: str, effect: str | None) -> None:
    """Wrap the writer: after the chosen append, report and wait to be killed."""
    writer = engine.writer
    append = writer.append

    def append_then_block(etype: str, payload: dict[str, Any], state: dict[str, Any],
                          **kw: Any) -> int:
        seq = append(etype, payload, state, **kw)
        if etype == event_type and (effect is None or payload.get("effect") == effect):
            conn.send(("at", seq))
            conn.recv()  # never answered: the parent sends SIGKILL
        return seq

    writer.append = append_then_block  # type: ignore[method-assign]


def run_as_runner(store_path: str, runs: str, project: str, run_id: str, runner: str,
                  block_after: tuple[str, str | None] | None, conn: Connection) -> None:
    """Register as ``runner``, claim ``run_id`` and execute it in this process.

    With ``block_after`` = (event type, effect) the child stops right after
    writing that trace event and waits for its SIGKILL. Reports the outcome
    if it gets that far (a node may also kill this process itself).
    """
    with child_store(store_path, lease_ms=60_000) as store:
        store.register_runner(runner, "host", os.getpid(), process_start_time(), host_name())
        claim = store.claim_by_id(run_id, runner)
        conn.send(("pid", os.getpid()))

        def hook(engine: Engine) -> None:
            if block_after is not None:
                _block_after(engine, conn, *block_after)

        try:
            out = execute_claim(store, claim, runs_dir=Path(runs), project_dir=Path(project),
                                fsync="always", engine_hook=hook)
        except ClaimLost:
            conn.send(("claim_lost", None))
            return
        conn.send(("done", out.outcome))


def _dump(out: str, data: Any) -> None:
    Path(out).write_text(json.dumps(data))


# ---- claim races ------------------------------------------------------------


def race_claims(path: str, runner: str, barrier: Barrier, out: str) -> None:
    """Claim until nothing is left; record every (run, token) this process got."""
    with child_store(path, busy_timeout_ms=20_000) as store:
        barrier.wait()
        got = []
        while (claim := store.claim_next(runner)) is not None:
            got.append([claim.run_id, claim.token])
    _dump(out, got)


def _append(log: Path, line: str) -> None:
    with log.open("a") as fh:
        fh.write(line + "\n")


def race_short_leases(path: str, runs_dir: str, runner: str, barrier: Barrier, out: str,
                      total: int, lease_ms: int, deadline_s: float) -> None:
    """Run the whole owner cycle under leases short enough to expire mid-race.

    Every write to a run's log goes through the fence, and the final
    ``finish`` happens inside the fence too. Some owners stall past their
    lease on purpose, so others take their runs over.
    """
    finished: list[list[str]] = []
    lost = claims = 0
    end = time.monotonic() + deadline_s
    with child_store(path, lease_ms=lease_ms, busy_timeout_ms=20_000) as store:
        barrier.wait()
        while time.monotonic() < end:
            claim = store.claim_next(runner)
            if claim is None:
                if len(store.list_runs("done", limit=total + 1)) == total:
                    break
                time.sleep(0.002)  # polling for expired claims, with a deadline
                continue
            claims += 1
            run, token = claim.run_id, claim.token
            log = Path(runs_dir) / run / "log"
            try:
                with fenced(store, log.parent, run, token):
                    _append(log, f"{token} claim {claim.state}")
                if claim.state == "starting":
                    store.mark_running(run, token)
                store.renew(run, token)
                if claims % 10 == 1:
                    time.sleep(lease_ms * 3 / 1000)  # a slow owner: its lease runs out
                with fenced(store, log.parent, run, token):
                    _append(log, f"{token} finish")
                    store.finish(run, token)
                finished.append([run, token])
            except (ClaimLost, TransitionRefused):
                lost += 1
    _dump(out, {"finished": finished, "lost": lost, "claims": claims})


# ---- fence and takeover -------------------------------------------------------


def take_over_and_write(path: str, bundle_dir: str, run_id: str, now: int,
                        conn: Connection) -> None:
    """The new owner: claim a stalled run, write through the fence, then obey the parent.

    Stalled: it watched the claim go a lease of its monotonic time unrenewed.
    """
    mono = FakeClock(0.0)
    with child_store(path, clock=FakeClock(now), monotonic=mono) as store:
        store.watch_claims()
        mono.advance(store.lease_ms / 1000)
        claim = store.claim_by_id(run_id, "runner-new")
        target = Path(bundle_dir) / "state.json"
        with fenced(store, Path(bundle_dir), run_id, claim.token):
            target.write_text("new-1")
        conn.send(claim.token)
        while (msg := conn.recv()) != "exit":
            if msg == "write":
                with fenced(store, Path(bundle_dir), run_id, claim.token):
                    target.write_text("new-2")
                conn.send("written")
            elif msg == "hold":
                with fenced(store, Path(bundle_dir), run_id, claim.token):
                    conn.send("holding")
                    assert conn.recv() == "release"
                conn.send("released")


def hold_claims(path: str, runner: str, now: int, claims: list[tuple[str, str | None, bool]],
                conn: Connection) -> None:
    """Register as a runner, claim the given runs, report, then block until killed.

    ``claims`` holds ``(run_id, session or None, make_running)`` entries.
    """
    with child_store(path, clock=FakeClock(now)) as store:
        store.register_runner(runner, "host", os.getpid(), process_start_time(), host_name())
        tokens = {}
        for run_id, session, running in claims:
            claim = store.claim_by_id(run_id, runner, session=session)
            if running:
                store.mark_running(run_id, claim.token)
            tokens[run_id] = claim.token
        conn.send(tokens)
        conn.recv()  # never answered: the parent kills this process


# ---- feed ----------------------------------------------------------------------


def deliver_notifications(path: str, session: str, barrier: Barrier, out: str,
                          release_some: bool) -> None:
    """Claim, deliver, and sometimes hand back, until no notification is left."""
    delivered = []
    refused = 0
    with child_store(path, busy_timeout_ms=20_000) as store:
        barrier.wait()
        round_ = 0
        while True:
            token, rows = store.claim_notifications(session, limit=7)
            if not rows:
                break
            round_ += 1
            if release_some and round_ % 3 == 0:
                store.release_notifications(token)
                continue
            for row in rows:
                if store.mark_notification_delivered(row.id, token):
                    delivered.append(row.id)
                else:
                    refused += 1
    _dump(out, {"delivered": delivered, "refused": refused})


def resolve_intents(path: str, session: str, barrier: Barrier, out: str) -> None:
    resolved = []
    refused = 0
    with child_store(path, busy_timeout_ms=20_000) as store:
        barrier.wait()
        while True:
            token, intents = store.claim_turn_intents(session, limit=3)
            if not intents:
                break
            for intent in intents:
                try:
                    store.resolve_turn_intent(intent.intent_id, token)
                    resolved.append(intent.intent_id)
                except TransitionRefused:
                    refused += 1
    _dump(out, {"resolved": resolved, "refused": refused})


# ---- the write lock ----------------------------------------------------------------


def hold_write_lock(path: str, hold_s: float, conn: Connection) -> None:
    """Take SQLite's write lock on a plain connection, say so, hold it, let go."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    conn.send("locked")
    time.sleep(hold_s)  # the thing under test: a writer that keeps the lock this long
    db.execute("COMMIT")
    db.close()
    conn.send("released")


def open_and_enqueue(path: str, run_id: str, barrier: Barrier) -> None:
    """Open a store that may not exist yet, at the same moment as others."""
    barrier.wait()
    with child_store(path, busy_timeout_ms=20_000) as store:
        store.enqueue_detached(run_id, SOURCE, {})


def crash_with_wal(path: str, rows: int) -> None:
    """Write a foreign WAL database and die before any checkpoint: its rows stay in -wal."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    for i in range(rows):
        db.execute("INSERT INTO notes(body) VALUES (?)", (f"note {i}",))
    os._exit(0)
