"""A torn trace tail in a composed graph: a crash at every line boundary and in the
middle of every line of a run through an include resumes and finishes correctly.

Like ``test_torn_tail`` (which sweeps every byte of a plain graph), one
uninterrupted run records the trace and the projection after every
transition; each crash point rebuilds the bundle a crash there leaves and
resumes it. Each compute node appends a line to its own file, so a node that
ran twice would show; the include's entry and exit must be passed once each.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pi_workflows import compute, define_workflow, definition_digest, edge, include, switch
from pi_workflows.protocol.bundle import Bundle
from pi_workflows.protocol.store import Store
from pi_workflows.worker.engine import ResumeRefused

from tests.helpers.engine import SOURCE, Direct, assert_well_formed, fast_dir, file_lines

pytestmark = pytest.mark.timeout(120)


def _node(name: str) -> Any:
    def fn(ctx: Any) -> Any:
        with open(ctx.project_dir / f"{name}.log", "a") as fh:
            fh.write(f"{ctx.attempt_id}\n")
        return {"n": len(ctx.outputs), "go": 1}
    return fn


CHILD = define_workflow(
    name="inner", start_at="x", nodes=[compute("x", _node("x")), compute("y", _node("y"))],
    edges=[switch("x", "$.go", {1: "y"})], exits={"done": "y"}, max_steps=2)
WORKFLOW = define_workflow(
    name="torncomp", start_at="a",
    nodes=[compute("a", _node("a")), include(CHILD, input={"k": 1}, as_="m"),
           compute("b", _node("b"))],
    edges=[edge("a", "m"), edge("m.done", "b")])
LOGS = ("a", "x", "y", "b")
# run_started, a (2), include_entered, x (2), y (2), include_exited, b (2), run_completed
LINES = 12


@dataclass
class History:
    direct: Direct
    trace: bytes
    ends: list[int]
    snaps: list[tuple[bytes, bytes, bytes]]
    workflow_json: bytes
    final: dict[str, Any]
    scratch: Path
    events: list[dict[str, Any]]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    base = tmp_path_factory.mktemp("torncomp")
    with fast_dir(base / "fast") as scratch:
        store = Store(base / "store.sqlite3", lease_ms=3_600_000, synchronous="OFF")
        direct = Direct(store, scratch / "orig-runs", "20260101T000000Z-t-0c0ffee0",
                        WORKFLOW, scratch / "orig-project")
        direct.project.mkdir(parents=True)
        direct.enqueue()
        engine = direct.engine()
        writer = engine.writer
        snaps: list[tuple[bytes, bytes, bytes]] = []

        def snap() -> None:
            log = writer.bundle.state_log_path
            snaps.append((writer.bundle.state_path.read_bytes(),
                          log.read_bytes() if log.exists() else b"",
                          writer.bundle.manifest_path.read_bytes()))

        create, append = writer.create, writer.append

        def create_and_snap(*args: Any, **kwargs: Any) -> None:
            create(*args, **kwargs)
            snap()

        def append_and_snap(*args: Any, **kwargs: Any) -> int:
            seq = append(*args, **kwargs)
            snap()
            return seq

        writer.create = create_and_snap  # type: ignore[method-assign]
        writer.append = append_and_snap  # type: ignore[method-assign]
        engine.create(run_input={}, source=SOURCE, digest=definition_digest(WORKFLOW))
        assert engine.run() == "completed"
        bundle = writer.bundle
        trace = bundle.trace_path.read_bytes()
        ends = [0] + [i + 1 for i, byte in enumerate(trace) if byte == ord("\n")]
        assert len(ends) - 1 == LINES == len(snaps) - 1
        yield History(direct, trace, ends, snaps, bundle.workflow_path.read_bytes(),
                      bundle.state(), scratch, assert_well_formed(bundle))
        store.close()


def _build(hist: History, where: Path, offset: int, seq: int) -> tuple[Bundle, Path]:
    if where.exists():
        shutil.rmtree(where)
    runs, project = where / "runs", where / "project"
    bdir = runs / hist.direct.run_id
    (bdir / "session").mkdir(parents=True, mode=0o700)
    (bdir / "artifacts").mkdir(mode=0o700)
    project.mkdir()
    (bdir / "workflow.json").write_bytes(hist.workflow_json)
    state, journal, manifest = hist.snaps[seq]
    (bdir / "state.json").write_bytes(state)
    if journal:
        (bdir / "state.ndjson").write_bytes(journal)
    (bdir / "manifest.json").write_bytes(manifest)
    (bdir / "trace.ndjson").write_bytes(hist.trace[:offset])
    for event in hist.events[:seq]:
        if event["type"] == "node_finished":
            name = event["nodeId"].rsplit("/", 1)[-1]
            (project / f"{name}.log").write_text("before the crash\n")
    return Bundle(runs, hist.direct.run_id), project


def _check(hist: History, offset: int, seq: int) -> None:
    bundle, project = _build(hist, hist.scratch / "copy", offset, seq)
    where = f"offset {offset}, projection at seq {seq}"
    if seq == LINES:
        with pytest.raises(ResumeRefused):
            hist.direct.resume(runs=bundle.dir.parent, project=project)
        return
    engine = hist.direct.resume(runs=bundle.dir.parent, project=project)
    assert engine.run() == "completed", where
    events = assert_well_formed(bundle)
    assert events[:seq] == hist.events[:seq], where
    kinds = [e["type"] for e in events]
    assert kinds.count("include_entered") == kinds.count("include_exited") == 1, where
    for name in LOGS:
        assert len(file_lines(project / f"{name}.log")) == 1, (where, name)
    state = bundle.state()
    assert state["outputs"] == hist.final["outputs"], where
    assert state["steps"] == hist.final["steps"] == 4, where
    assert state.get("mountSteps") == {}, where


def test_every_line_boundary_and_every_torn_line(history: History) -> None:
    points: list[tuple[int, int]] = []
    for i in range(LINES + 1):
        points.append((history.ends[i], i))  # a clean cut after line i
        if i < LINES:  # a cut in the middle of line i + 1: the projection is at i
            points.append(((history.ends[i] + history.ends[i + 1]) // 2, i))
        if i > 0:  # a cut on the boundary with the projection one line behind
            points.append((history.ends[i], i - 1))
    for offset, seq in points:
        _check(history, offset, seq)
