"""Random graphs, random park points: resuming always ends where an uninterrupted run does."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pi_workflows import compute, define_workflow, edge, switch
from pi_workflows.protocol.definitions.graph import Workflow
from pi_workflows.protocol.store import Store
from pi_workflows.worker.control import Control

from tests.helpers.engine import Direct, assert_well_formed, fast_dir


@dataclass(frozen=True)
class Shape:
    size: int
    # For node i < size-1: ("edge", j) or ("switch", {value: j}, default j).
    exits: tuple[Any, ...]
    seed: int


@st.composite
def shapes(draw: st.DrawFn) -> Shape:
    size = draw(st.integers(2, 6))
    exits: list[Any] = []
    for i in range(size - 1):
        later = st.integers(i + 1, size - 1)
        if draw(st.booleans()):
            exits.append(("edge", i + 1))  # i+1 is always a target: every node is reachable
        else:
            values = draw(st.lists(st.integers(0, 2), min_size=1, max_size=3, unique=True))
            cases = {v: draw(later) for v in values}
            exits.append(("switch", cases, i + 1))
    return Shape(size, tuple(exits), draw(st.integers(0, 1000)))


@dataclass
class Probe:
    """Counts node executions; parks the run at chosen executions."""

    parks: dict[int, str]  # execution number -> "mid" (park while running) | "after"
    control: Control | None = None
    executed: int = 0

    def __post_init__(self) -> None:
        self.per_node: Counter[str] = Counter()
        self.mid_parks: Counter[str] = Counter()


def build(shape: Shape, probe: Probe) -> Workflow:
    def node(i: int) -> Any:
        def fn(ctx: Any) -> Any:
            probe.executed += 1
            probe.per_node[ctx.node_id] += 1
            mode = probe.parks.get(probe.executed)
            value = {"k": (ctx.input["seed"] * (i + 3) + len(ctx.outputs)) % 3,
                     "from": sorted(ctx.outputs)}
            if mode is not None and probe.control is not None:
                probe.control.request_park()
                if mode == "mid":
                    probe.mid_parks[ctx.node_id] += 1
                    ctx.cancel.wait(30)  # stopped by the park: this attempt is dropped
            return value
        return fn

    names = [f"n{i}" for i in range(shape.size)]
    edges: list[Any] = []
    for i, spec in enumerate(shape.exits):
        if spec[0] == "edge":
            edges.append(edge(names[i], names[spec[1]]))
        else:
            edges.append(switch(names[i], "$output.k",
                                {v: names[j] for v, j in spec[1].items()},
                                default=names[spec[2]]))
    return define_workflow(name="prop", start_at="n0",
                           nodes=[compute(n, node(i)) for i, n in enumerate(names)],
                           edges=edges)


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, Path]]:
    base = tmp_path_factory.mktemp("prop")
    with fast_dir(base / "fast") as scratch, Store(base / "store.sqlite3",
                                                  synchronous="OFF") as store:
        yield store, scratch


_ids = itertools.count(1)


def _run(store: Store, root: Path, shape: Shape, parks: dict[int, str]) -> tuple[
        dict[str, Any], Probe, list[dict[str, Any]]]:
    probe = Probe(parks)
    wf = build(shape, probe)
    direct = Direct(store, root / "runs", f"20260101T000000Z-prop-{next(_ids):08x}", wf, root)
    direct.enqueue()
    probe.control = Control()
    outcome = direct.start({"seed": shape.seed}, control=probe.control).run()
    resumes = 0
    while outcome == "parked":
        resumes += 1
        assert resumes <= len(parks)
        direct.park()
        direct.claim()
        probe.control = Control()
        outcome = direct.resume(control=probe.control).run()
    assert outcome == "completed"
    engine_bundle = direct.engine().writer.bundle
    events = assert_well_formed(engine_bundle)
    assert sum(e["type"] == "run_resumed" for e in events) == resumes
    return engine_bundle.state(), probe, events


@pytest.mark.timeout(120)
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(shape=shapes(),
       parks=st.dictionaries(st.integers(1, 8), st.sampled_from(["mid", "after"]),
                             max_size=3))
def test_park_and_resume_anywhere_reaches_the_uninterrupted_result(
        place: tuple[Store, Path], shape: Shape, parks: dict[int, str]) -> None:
    store, root = place
    expected, plain, _ = _run(store, root, shape, {})
    got, probe, events = _run(store, root, shape, parks)
    assert got["outputs"] == expected["outputs"]
    assert got["finalOutput"] == expected["finalOutput"]
    assert got["steps"] == expected["steps"]
    assert got["results"] == expected["results"]
    # Only an attempt stopped by a park runs again; nothing that finished reruns.
    settled = {e["attemptId"] for e in events if e["type"] in ("node_finished", "node_failed")}
    dropped: Counter[str] = Counter()
    for i, event in enumerate(events):
        if event["type"] == "node_started" and event["attemptId"] not in settled:
            dropped[event["nodeId"]] += 1
            assert events[i + 1]["type"] == "run_resumed"  # it was parked, then resumed
    assert sum(dropped.values()) >= sum(probe.mid_parks.values())
    for name in plain.per_node | probe.per_node:
        assert probe.per_node[name] == plain.per_node[name] + dropped[name], name
    finished = [e["nodeId"] for e in events if e["type"] == "node_finished"]
    assert len(finished) == len(set(finished)) == expected["steps"]
