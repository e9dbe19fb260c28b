"""Engine benchmark: the cost of one node transition per bundle fsync policy.

A node transition is what the engine pays at every step: the fenced bundle
append (take the run's lock file, verify the claim token in the store,
append the trace line, replace ``state.json``) plus one store
compare-and-set (a lease renewal). It is timed for each fsync policy
(``always``, ``node``, ``never``) next to two floors measured in the same
run on the same disk: one bare SQLite commit with ``synchronous=FULL`` and
one append + fsync of a line to a plain file. Figures only; nothing is
asserted.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pi_workflows.protocol.bundle import Bundle
from pi_workflows.protocol.bundlewriter import BundleWriter
from pi_workflows.protocol.fence import fenced
from pi_workflows.protocol.store import RunSource, Store

SOURCE = RunSource("bench", "/bench/bench.workflow.py", "ab" * 32, "sha256:" + "0" * 64)


def _state(step: int) -> dict[str, Any]:
    """A projection the size of a small real run (about 1.5 KB)."""
    outputs = {f"node{i}": {"summary": f"result of node {i}", "items": list(range(8))}
               for i in range(6)}
    return {"status": "running", "workflow": "bench", "input": {"task": "benchmark"},
            "outputs": outputs, "results": {n: {"outcome": "ok"} for n in outputs},
            "steps": step, "currentNode": f"node{step % 6}", "currentAttempt": None,
            "paused": False}


def _timed(op: Callable[[int], None], seconds: float, max_ops: int) -> list[float]:
    """Run ``op(i)`` until the budget or the cap (after a short warm-up); ms per call."""
    for i in range(3):
        op(-1 - i)
    samples: list[float] = []
    end = time.perf_counter() + seconds
    while len(samples) < max_ops and (len(samples) < 20 or time.perf_counter() < end):
        start = time.perf_counter()
        op(len(samples))
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def _row(label: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (f"  {label:<44} {statistics.fmean(samples):>8.3f} {statistics.median(samples):>8.3f}"
            f" {p99:>8.3f} {len(samples):>6}")


class _Run:
    """A claimed run with a fresh bundle, for one measurement."""

    def __init__(self, directory: Path, name: str, policy: str, synchronous: str) -> None:
        self.store = Store(directory / f"{name}.sqlite3", lease_ms=3_600_000,
                           synchronous=synchronous)
        self.run_id = f"20260101T000000Z-{name}-00000000"
        self.store.enqueue_detached(self.run_id, SOURCE, {"task": "benchmark"})
        claim = self.store.claim_by_id(self.run_id, "bench")
        self.store.mark_running(self.run_id, claim.token)
        self.token = claim.token
        self.writer = BundleWriter(Bundle(directory / f"runs-{name}", self.run_id), self.store,
                                   claim.token, fsync=policy)
        self.writer.create({"workflow": "bench", "source": {"path": SOURCE.source_path},
                            "digest": SOURCE.definition_digest},
                           {"schema": "bench"}, _state(0))

    def transition(self, i: int, event_type: str | None = None) -> None:
        kind = event_type or ("node_started" if i % 2 == 0 else "node_finished")
        payload: dict[str, Any] = {"step": i, "rerun": False}
        if kind == "node_finished":
            payload = {"output": {"summary": "done", "items": list(range(8))},
                       "result": {"outcome": "ok"}, "next": "node1"}
        self.writer.append(kind, payload, _state(i), node_id="node0",
                           attempt_id=f"node0-{i}-abcdef")
        self.store.renew(self.run_id, self.token)

    def close(self) -> None:
        self.store.close()


def bare_full_commit(directory: Path, seconds: float, max_ops: int) -> list[float]:
    conn = sqlite3.connect(directory / "bare.sqlite3", isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")

        def op(i: int) -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t(body) VALUES (?)", (f"row-{i}",))
            conn.execute("COMMIT")

        return _timed(op, seconds, max_ops)
    finally:
        conn.close()


def append_fsync(directory: Path, seconds: float, max_ops: int) -> list[float]:
    line = b'{"seq":1,"type":"node_finished","payload":{"output":{"summary":"done"}}}\n'
    path = directory / "plain.ndjson"

    def op(i: int) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    return _timed(op, seconds, max_ops)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench engine", description=__doc__)
    parser.add_argument("--seconds", type=float, default=4.0,
                        help="time budget per figure (default 4)")
    parser.add_argument("--max-ops", type=int, default=2000,
                        help="at most this many timed operations per figure (default 2000)")
    parser.add_argument("--synchronous", default="NORMAL", choices=("NORMAL", "FULL"),
                        help="the store's SQLite synchronous mode (default NORMAL, the"
                             " settings default)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the temporary files go (default: the system temp dir)")
    args = parser.parse_args(argv)
    seconds, cap = args.seconds, args.max_ops

    with tempfile.TemporaryDirectory(prefix="pi-workflows-bench-", dir=args.dir) as tmp:
        directory = Path(tmp)
        print(f"engine benchmark  sqlite {sqlite3.sqlite_version}  store synchronous"
              f" {args.synchronous}  dir {directory}  ({os.cpu_count()} cpus)")
        print()
        print(f"  {'operation':<44} {'mean ms':>8} {'p50 ms':>8} {'p99 ms':>8} {'ops':>6}")
        print("  node transition = fenced append (lock + claim check + trace line + state.json)"
              " + store renew")
        for policy in ("always", "node", "never"):
            run = _Run(directory, f"t-{policy}", policy, args.synchronous)
            try:
                print(_row(f"node transition, fsync={policy}",
                           _timed(run.transition, seconds, cap)), flush=True)
            finally:
                run.close()
        run = _Run(directory, "t-note", "node", args.synchronous)
        try:
            print(_row("non-boundary event (effect_recorded), node",
                       _timed(lambda i: run.transition(i, "effect_recorded"), seconds, cap)),
                  flush=True)
            print(_row("fence only (lock file + claim check)",
                       _timed(lambda i: _fence_only(run), seconds, cap)), flush=True)
            print(_row("store renew only (one CAS transaction)",
                       _timed(lambda i: _renew_only(run), seconds, cap)), flush=True)
        finally:
            run.close()
        print(_row("bare SQLite commit, WAL, synchronous=FULL",
                   bare_full_commit(directory, seconds, cap)), flush=True)
        print(_row("append one line + fsync (plain file)",
                   append_fsync(directory, seconds, cap)), flush=True)
    print("  (fsync=node syncs node_started/node_finished and run lifecycle events, so a node"
          " transition")
    print("   costs the same as with always; effect, agent and pause events are not synced)")
    return 0


def _renew_only(run: _Run) -> None:
    run.store.renew(run.run_id, run.token)


def _fence_only(run: _Run) -> None:
    with fenced(run.store, run.writer.bundle.dir, run.run_id, run.token):
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
