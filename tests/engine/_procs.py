"""Child-process bodies for the engine tests (spawn-safe, top level).

A child opens its own ``Store`` on the shared file, registers as a runner
(pid and start time, so the parent can prove it dead after ``kill -9``) and
talks to the test through a pipe. Nothing here sleeps to synchronise.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from pi_workflows.protocol.errors import ClaimLost, TransitionRefused
from pi_workflows.protocol.liveness import host_name, process_start_time
from pi_workflows.protocol.store import Store
from pi_workflows.worker.engine import Engine
from pi_workflows.worker.runner import execute_claim

CTX = multiprocessing.get_context("spawn")


def start(target: Any, *args: Any) -> tuple[BaseProcess, Connection]:
    parent, child = CTX.Pipe()
    proc = CTX.Process(target=target, args=(*args, child), daemon=True)
    proc.start()
    child.close()
    return proc, parent


def recv(conn: Connection, timeout_s: float = 30.0) -> Any:
    assert conn.poll(timeout_s), "the child did not answer in time"
    return conn.recv()


def stop(proc: BaseProcess, timeout_s: float = 30.0) -> None:
    proc.join(timeout_s)
    if proc.is_alive():
        proc.kill()
        proc.join()
        raise AssertionError("the child did not exit in time")


def take_over_later(store_path: str, runs: str, project: str, run_id: str,
                    conn: Connection) -> None:
    """The new owner: once told, claim ``run_id`` as soon as its lease ran out; hold it;
    run it to the end when told to."""
    with Store(Path(store_path), lease_ms=60_000) as store:
        conn.send("ready")
        assert conn.recv() == "take"
        end = time.monotonic() + 30
        while True:
            try:
                claim = store.claim_by_id(run_id, "runner-new")
                break
            except TransitionRefused:
                if time.monotonic() > end:
                    raise
                time.sleep(0.01)  # polling for the old lease to run out, with a deadline
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
    with Store(Path(store_path), lease_ms=60_000) as store:
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
