"""Store benchmark: CAS throughput per durability mode and claim_next latency.

Figures only; nothing is asserted. Every figure comes from a fresh file in a
temporary directory on the same file system (``--dir`` picks it), so the
store's cost can be read against a bare single-row SQLite commit measured in
the same run on the same disk.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pi_workflows.protocol.store import RunSource, Store

SOURCE = RunSource("bench", "/bench/bench.workflow.py", "ab" * 32, "sha256:" + "0" * 64)
INPUT = {"task": "benchmark", "args": list(range(10))}


def _timed_loop(step: Callable[[int], None], seconds: float, max_iterations: int) -> tuple[int,
                                                                                           float]:
    """Run ``step(i)`` until the time budget or the iteration cap; return (count, elapsed)."""
    start = time.perf_counter()
    count = 0
    while count < max_iterations:
        step(count)
        count += 1
        if (count & 7) == 0 and time.perf_counter() - start >= seconds:
            break
    return count, time.perf_counter() - start


def bare_commits(directory: Path, synchronous: str, seconds: float) -> float:
    """Single-row INSERT + COMMIT per transaction, WAL, the given synchronous: commits/s."""
    conn = sqlite3.connect(directory / f"bare-{synchronous}.sqlite3", isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")

        def step(i: int) -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t(body) VALUES (?)", (f"row-{i}",))
            conn.execute("COMMIT")

        count, elapsed = _timed_loop(step, seconds, 10**7)
    finally:
        conn.close()
    return count / elapsed


def store_cycles(directory: Path, synchronous: str, seconds: float) -> tuple[float, float]:
    """enqueue, claim_next, renew, mark_running, finish: (cycles/s, CAS transitions/s)."""
    with Store(directory / f"store-{synchronous}.sqlite3", synchronous=synchronous) as store:

        def step(i: int) -> None:
            run_id = f"run-{i}"
            store.enqueue_detached(run_id, SOURCE, INPUT)
            claim = store.claim_next("bench-runner")
            assert claim is not None and claim.run_id == run_id
            store.renew(run_id, claim.token)
            store.mark_running(run_id, claim.token)
            store.finish(run_id, claim.token)

        count, elapsed = _timed_loop(step, seconds, 10**7)
    # claim, renew, mark running and finish are the compare-and-set transitions.
    return count / elapsed, 4 * count / elapsed


def claim_latency(directory: Path, queued: int, samples: int) -> tuple[float, float, float]:
    """claim_next with ``queued`` rows waiting (kept constant): (p50, p99, max) in ms."""
    path = directory / f"latency-{queued}.sqlite3"
    with Store(path, synchronous="OFF") as filler:  # filling is not what is measured
        for i in range(queued):
            filler.enqueue_detached(f"q-{i:06d}", SOURCE, INPUT)
    timings: list[float] = []
    with Store(path) as store:
        for i in range(samples):
            start = time.perf_counter()
            claim = store.claim_next("bench-runner")
            timings.append((time.perf_counter() - start) * 1000)
            assert claim is not None
            store.enqueue_detached(f"refill-{i:06d}", SOURCE, INPUT)  # keep the depth
    timings.sort()
    p99 = timings[min(len(timings) - 1, int(len(timings) * 0.99))]
    return statistics.median(timings), p99, timings[-1]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench store", description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0,
                        help="time budget per throughput figure (default 3)")
    parser.add_argument("--samples", type=int, default=500,
                        help="claim_next calls timed per queue depth (default 500)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the temporary files go (default: the system temp dir)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="pi-workflows-bench-", dir=args.dir) as tmp:
        directory = Path(tmp)
        print(f"store benchmark  sqlite {sqlite3.sqlite_version}  dir {directory}"
              f"  ({os.cpu_count()} cpus)")
        print()
        print("throughput, one process, WAL")
        print(f"  {'synchronous':<12} {'bare commits/s':>15} {'store cycles/s':>15}"
              f" {'CAS/s':>10} {'commits/cycle':>14} {'store/bare':>11}")
        for mode in ("NORMAL", "FULL"):
            bare = bare_commits(directory, mode, args.seconds)
            cycles, cas = store_cycles(directory, mode, args.seconds)
            # A cycle is five write transactions (enqueue + the four CAS steps).
            ratio = cycles * 5 / bare
            print(f"  {mode:<12} {bare:>15,.0f} {cycles:>15,.0f} {cas:>10,.0f}"
                  f" {5:>14} {ratio:>10.0%}")
        print("  (a cycle = enqueue, claim_next, renew, mark_running, finish;"
              " CAS/s counts the last four;")
        print("   store/bare = store commits per second over bare single-row commits per second)")
        print()
        print(f"claim_next latency, synchronous NORMAL, {args.samples} claims, depth kept constant")
        print(f"  {'queued rows':>12} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}")
        for depth in (100, 10_000):
            p50, p99, worst = claim_latency(directory, depth, args.samples)
            print(f"  {depth:>12,} {p50:>9.3f} {p99:>9.3f} {worst:>9.3f}")
    return 0
