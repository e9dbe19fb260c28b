"""The DBOS side of ``python -m bench peers``: a DBOS Transact app run as its own process.

``python -m bench.peers_dbos_app MODE --db FILE [...]`` launches DBOS with
a SQLite system database at ``FILE``, registers one queue, and does one
thing, printing one JSON object per line on stdout (the bench reads
them): ``throughput`` (enqueue ``--runs`` workflows of ``--steps`` trivial
steps, wait for all), ``latency`` (one workflow at a time into an idle
queue: enqueue -> first step start), ``hold`` (``--runs`` workflows whose
first step blocks until a release file exists; then the process waits to
be killed with ``kill -9``) and ``recover`` (a new process on the same
database: DBOS's start-up recovery resumes what ``hold`` left). Every
step start in ``hold``/``recover`` appends ``pid workflow-id epoch-s`` to
``--marks``, so the bench sees which process runs which step without
talking to it.

``--journal wal`` puts every system-database connection in WAL with
``synchronous=NORMAL`` (an SQLAlchemy connect hook); ``--journal default``
leaves DBOS's own settings (SQLite's rollback journal, ``synchronous=FULL``).
Only this module imports ``dbos`` (and SQLAlchemy, which it brings); the
bench process and the test suite never do. Imported by name at run time
so type checking does not need DBOS installed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

QUEUE = "bench_queue"


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.peers_dbos_app")
    parser.add_argument("mode", choices=["throughput", "latency", "hold", "recover"])
    parser.add_argument("--db", type=Path, required=True, help="the SQLite system database")
    parser.add_argument("--journal", choices=["wal", "default"], default="wal")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=0,
                        help="the queue's worker_concurrency (0: DBOS's default, no limit)")
    parser.add_argument("--poll", type=float, default=1.0,
                        help="the queue's polling_interval_sec (DBOS's default is 1.0)")
    parser.add_argument("--marks", type=Path, help="hold/recover: step-start marks file")
    parser.add_argument("--release", type=Path, help="hold/recover: the step waits for it")
    return parser.parse_args(argv)


def wal_normal() -> None:
    """Every SQLAlchemy connection (DBOS's included) opens in WAL, synchronous NORMAL."""
    sa = importlib.import_module("sqlalchemy")
    sa_event = importlib.import_module("sqlalchemy.event")

    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute("PRAGMA journal_mode=WAL")
        dbapi_conn.execute("PRAGMA synchronous=NORMAL")

    sa_event.listen(sa.engine.Engine, "connect", on_connect)


def build(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """DBOS, configured and with the bench's workflows registered (not launched yet)."""
    dbos_mod = importlib.import_module("dbos")
    DBOS = dbos_mod.DBOS
    if args.journal == "wal":
        wal_normal()
    DBOS(config={"name": "pi-wf-peers-bench", "system_database_url": f"sqlite:///{args.db}",
                 "log_level": "WARNING"})

    @DBOS.step()
    def trivial(i: int) -> float:
        return time.time()

    @DBOS.workflow()
    def chain(steps: int) -> list[float]:
        # Each step's start time: the first is the latency figure, the last the end.
        return [trivial(i) for i in range(steps)]

    @DBOS.step()
    def blocking(marks: str, release: str) -> bool:
        with open(marks, "a") as out:
            out.write(f"{os.getpid()} {DBOS.workflow_id} {time.time():.6f}\n")
        while not os.path.exists(release):
            time.sleep(0.02)
        return True

    @DBOS.workflow()
    def hold(marks: str, release: str) -> bool:
        blocking(marks, release)
        return bool(trivial(1))

    return DBOS, {"chain": chain, "hold": hold}


def launch(DBOS: Any, args: argparse.Namespace) -> Any:
    began = time.time()
    DBOS.launch()
    queue = DBOS.register_queue(QUEUE, worker_concurrency=args.concurrency or None,
                                polling_interval_sec=args.poll)
    emit(event="launched", pid=os.getpid(), began=began, at=time.time(),
         version=importlib.import_module("importlib.metadata").version("dbos"))
    return queue


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    DBOS, flows = build(args)
    queue = launch(DBOS, args)
    if args.mode == "throughput":
        begin = time.time()
        handles = [queue.enqueue(flows["chain"], args.steps) for _ in range(args.runs)]
        enqueued = time.time()
        ends = [h.get_result()[-1] for h in handles]
        emit(event="throughput", runs=args.runs, begin=begin, enqueue_s=enqueued - begin,
             end=max(ends), elapsed_s=max(ends) - begin)
    elif args.mode == "latency":
        # A warm-up run, then each sample after a random pause: enqueues in step
        # with the queue's polling would see one phase of it only.
        queue.enqueue(flows["chain"], args.steps).get_result()
        samples = []
        for _ in range(args.samples):
            time.sleep(random.uniform(0, args.poll))
            begin = time.time()
            starts = queue.enqueue(flows["chain"], args.steps).get_result()
            samples.append({"first_ms": (starts[0] - begin) * 1000,
                            "done_ms": (starts[-1] - begin) * 1000})
        emit(event="latency", samples=samples)
    elif args.mode == "hold":
        for _ in range(args.runs):
            queue.enqueue(flows["hold"], str(args.marks), str(args.release))
        emit(event="enqueued", runs=args.runs)
        while True:  # the bench ends this process with kill -9
            time.sleep(1)
    else:  # recover: DBOS.launch() has already started recovering the pending workflows
        while not (args.release is not None and args.release.exists()):
            time.sleep(0.05)
    DBOS.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
