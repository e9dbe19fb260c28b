"""Steps benchmark: per-node transition time at step 10, 1,000 and 10,000 of one run.

Two workflows run through the engine in-process on a real store and bundle:
a loop (one compute node routed back to itself by a switch until a counter,
``max_steps`` raised: the projection keeps one entry) and a chain of
distinct nodes (the projection gains an output and a result per node, the
case that used to grow ``state.json`` with the run). Each figure is the mean
time between node starts over a window after the given step; the ratio is
step 10,000 (or the last measured) over step 10. Goal: within 1.5x.
Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pi_workflows import compute, define_workflow, edge, switch
from pi_workflows.protocol.bundle import Bundle
from pi_workflows.protocol.bundlewriter import BundleWriter
from pi_workflows.protocol.definitions.graph import Workflow, definition_digest
from pi_workflows.protocol.store import RunSource, Store
from pi_workflows.worker.engine import Engine

AT = (10, 1_000, 10_000)


def _loop(n: int) -> Workflow:
    def count(ctx: Any) -> Any:
        i = (ctx.outputs.get("count") or {}).get("i", 0) + 1
        return {"i": i, "done": i >= n}
    return define_workflow(name="loop", start_at="count", max_steps=n + 5,
                           nodes=[compute("count", count), compute("end", lambda ctx: 1)],
                           edges=[switch("count", "$output.done", {True: "end", False: "count"})])


def _chain(n: int) -> Workflow:
    nodes = [compute(f"n{i}", lambda ctx, i=i: {"i": i, "note": f"node {i} done"})
             for i in range(n)]
    return define_workflow(name="chain", start_at="n0", max_steps=n + 5, nodes=nodes,
                           edges=[edge(f"n{i}", f"n{i + 1}") for i in range(n - 1)])


def _run(directory: Path, wf: Workflow, fsync: str) -> tuple[list[float], int]:
    """Run ``wf`` to the end; (node start times, final state.json bytes)."""
    run_id = f"20260101T000000Z-{wf.name}-{fsync}-0001"
    store = Store(directory / f"{wf.name}-{fsync}.sqlite3", lease_ms=3_600_000)
    try:
        digest = definition_digest(wf)
        store.enqueue_detached(run_id, RunSource(str(wf.name), "/bench/steps.py", "ab" * 32,
                                                 digest), {})
        claim = store.claim_by_id(run_id, "bench")
        store.mark_running(run_id, claim.token)
        bundle = Bundle(directory / "runs", run_id)
        writer = BundleWriter(bundle, store, claim.token, fsync=fsync)
        engine = Engine(wf, writer, store, project_dir=directory)
        stamps: list[float] = []
        engine.on_node = lambda _node: stamps.append(time.perf_counter())
        engine.create(run_input={}, source={"path": "/bench/steps.py", "sha256": "ab" * 32},
                      digest=digest)
        engine.run()
        return stamps, bundle.state_path.stat().st_size
    finally:
        store.close()


def _per_node_ms(stamps: list[float], at: int, window: int) -> float | None:
    if at + window >= len(stamps):
        return None
    return (stamps[at + window] - stamps[at]) / window * 1000


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench steps", description=__doc__)
    parser.add_argument("--steps", type=int, default=10_300,
                        help="steps per run (default 10,300: past the last figure)")
    parser.add_argument("--window", type=int, default=200,
                        help="node starts averaged per figure (default 200)")
    parser.add_argument("--fsync", default="node", choices=("always", "node", "never"),
                        help="bundle fsync policy (default node, the settings default)")
    parser.add_argument("--only", choices=("loop", "chain"), default=None)
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the temporary files go (default: the system temp dir)")
    args = parser.parse_args(argv)
    kinds = [args.only] if args.only else ["loop", "chain"]
    print(f"steps benchmark  fsync {args.fsync}  {args.steps} steps  window {args.window}")
    print(f"  {'workflow':<8} " + " ".join(f"{'@' + str(a):>10}" for a in AT)
          + f" {'ratio':>7} {'state.json':>11}")
    with tempfile.TemporaryDirectory(prefix="pi-workflows-steps-", dir=args.dir) as tmp:
        for kind in kinds:
            wf = _loop(args.steps) if kind == "loop" else _chain(args.steps)
            stamps, size = _run(Path(tmp), wf, args.fsync)
            figures = [_per_node_ms(stamps, a, args.window) for a in AT]
            measured = [f for f in figures if f is not None]
            ratio = measured[-1] / measured[0] if len(measured) > 1 else float("nan")
            cells = " ".join(f"{f:>8.3f}ms" if f is not None else f"{'-':>10}" for f in figures)
            print(f"  {kind:<8} {cells} {ratio:>6.2f}x {size:>10}B", flush=True)
    print("  (ms per node = time between node starts; ratio = last figure / step 10; goal <= 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
