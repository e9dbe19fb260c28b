"""Hand-built workflow snapshots for the graph tests: small ones, a loop, a big random one.
Imports the standard library only; never pytest or a test module."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

EXAMPLES = sorted((Path(__file__).resolve().parents[4] / "examples").glob("*.workflow.py"))


def snap(start: str, nodes: list[str], edges: list[dict[str, Any]]) -> dict[str, Any]:
    return {"schema": "pi-workflows.workflow.v1", "name": "t", "startAt": start,
            "nodes": [{"id": n, "kind": "compute"} for n in nodes], "edges": edges}


def edge(a: str, b: str) -> dict[str, Any]:
    return {"type": "edge", "source": a, "target": b}


def switch(a: str, cases: dict[Any, str], default: str | None = None) -> dict[str, Any]:
    return {"type": "switch", "source": a, "on": "$.x",
            "cases": [{"value": v, "target": t} for v, t in cases.items()], "default": default}


LOOP = snap("a", ["a", "b", "c", "d", "lost"], [
    edge("a", "b"), switch("b", {"retry": "a", "on": "c"}, default="d"), edge("c", "d"),
    edge("d", "d"), edge("lost", "b")])


def big(n: int, seed: int = 7) -> dict[str, Any]:
    rng = random.Random(seed)
    ids = [f"n{i}" for i in range(n)]
    edges = []
    for i in range(n - 1):
        targets = {ids[i + 1]} | {ids[rng.randrange(i + 1, n)] for _ in range(rng.randrange(2))}
        if i > 5 and rng.random() < 0.05:
            targets.add(ids[rng.randrange(0, i)])  # a loop back
        edges.append(switch(ids[i], {k: t for k, t in enumerate(sorted(targets))}))
    return snap("n0", ids, edges)
