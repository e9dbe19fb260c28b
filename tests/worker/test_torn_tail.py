"""A crash at every byte of a real trace: resume always repairs and finishes correctly.

One uninterrupted run of a small multi-node workflow records the trace and
a copy of ``state.json`` and ``manifest.json`` after every transition. Then,
for every byte offset of the trace, a bundle is rebuilt as a crash would
have left it (the trace cut at that offset, a projection no newer than the
complete lines before the cut, since ``state.json`` is only ever written
after its trace line) and resumed. Each compute node appends a line to its
own file, so a node that ran twice would show.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pi_workflows import compute, define_workflow, edge, switch
from pi_workflows.protocol.bundle import Bundle
from pi_workflows.protocol.statelog import fold
from pi_workflows.protocol.store import Store
from pi_workflows.worker.engine import ResumeRefused

from tests.helpers.engine import Direct, assert_well_formed, bundle_bytes, fast_dir, file_lines

NODES = ("a", "b", "c")
LINES = 8  # run_started, (node_started, node_finished) x 3, run_completed


def _node(name: str) -> Any:
    def fn(ctx: Any) -> Any:
        with open(ctx.project_dir / f"{name}.log", "a") as fh:
            fh.write(f"{ctx.attempt_id}\n")
        # Small outputs keep the trace (and so the number of offsets) short.
        return {"n": len(ctx.outputs) + ctx.input["seed"], "go": "c" if name == "b" else 0}
    return fn


WORKFLOW = define_workflow(
    name="torn", start_at="a",
    nodes=[compute(n, _node(n)) for n in NODES],
    edges=[edge("a", "b"), switch("b", "$output.go", {"c": "c"})],
)


@dataclass
class History:
    direct: Direct
    trace: bytes
    ends: list[int]  # ends[i]: byte offset just after line i (ends[0] == 0)
    snaps: list[tuple[bytes, bytes, bytes]]  # (state.json, its journal, manifest) after s
    workflow_json: bytes
    final: dict[str, Any]
    scratch: Path
    events: list[dict[str, Any]]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    base = tmp_path_factory.mktemp("torn")
    with fast_dir(base / "fast") as scratch:
        store = Store(base / "store.sqlite3", lease_ms=3_600_000, synchronous="OFF")
        direct = Direct(store, scratch / "orig-runs", "20260101T000000Z-t-0badc0de",
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
        engine.create(run_input={"seed": 7}, source={"path": "/memory/wf.workflow.py",
                                                     "sha256": "cd" * 32},
                      digest=__import__("pi_workflows").definition_digest(WORKFLOW))
        assert engine.run() == "completed"
        bundle = writer.bundle
        trace = bundle.trace_path.read_bytes()
        ends = [0]
        for i, byte in enumerate(trace):
            if byte == ord("\n"):
                ends.append(i + 1)
        assert len(ends) - 1 == LINES == len(snaps) - 1
        assert any(journal for _, journal, _ in snaps)  # the journal's crashes are tried too
        for name in NODES:
            assert len(file_lines(direct.project / f"{name}.log")) == 1
        yield History(direct, trace, ends, snaps, bundle.workflow_path.read_bytes(),
                      bundle.state(), scratch, assert_well_formed(bundle))
        store.close()


def _build(hist: History, where: Path, offset: int, seq: int) -> tuple[Bundle, Path]:
    """The bundle (and side-effect files) a crash at ``offset`` with projection ``seq`` left."""
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
    for event in hist.events[:seq]:  # what ran before the crash, as far as it was recorded
        if event["type"] == "node_finished":
            (project / f"{event['nodeId']}.log").write_text("before the crash\n")
    return Bundle(runs, hist.direct.run_id), project


def _finished_in(events: list[dict[str, Any]]) -> set[str]:
    return {e["nodeId"] for e in events if e["type"] == "node_finished"}


def _check_resume(hist: History, offset: int, seq: int) -> None:
    where = hist.scratch / "copy"
    bundle, project = _build(hist, where, offset, seq)
    kept = hist.events[:seq]
    if seq == LINES:  # the projection already holds run_completed: nothing to resume
        before = bundle_bytes(bundle)
        with pytest.raises(ResumeRefused):
            hist.direct.resume(runs=bundle.dir.parent, project=project)
        assert bundle_bytes(bundle) == before
        return
    engine = hist.direct.resume(runs=bundle.dir.parent, project=project)
    assert engine.run() == "completed", (offset, seq)
    events = assert_well_formed(bundle)
    where_ = f"offset {offset}, projection at seq {seq}"
    # The kept prefix is untouched, byte for byte.
    assert hist.trace.startswith(bundle.trace_path.read_bytes()[:hist.ends[seq]]), where_
    assert events[:seq] == kept, where_
    new = events[seq:]
    if seq == 0:  # nothing was recorded: the run starts properly, then the boundary
        assert new[0]["type"] == "run_started", where_
        new = new[1:]
    boundary = new[0]
    assert boundary["type"] == "run_resumed" and boundary["payload"]["boundary"], where_
    dropped = hist.trace[hist.ends[seq]:offset]
    assert boundary["payload"]["droppedTraceLines"] == len(dropped.splitlines()), where_
    assert [e["type"] for e in new].count("run_resumed") == 1
    # Completed nodes never rerun; every other node runs exactly once more.
    done_before = _finished_in(kept)
    rerun = {e["nodeId"] for e in new if e["type"] == "node_started"}
    assert rerun == set(NODES) - done_before, where_
    for name in NODES:
        assert len(file_lines(project / f"{name}.log")) == 1, (where_, name)
    state = bundle.state()
    assert state["status"] == "completed"
    assert state["outputs"] == hist.final["outputs"], where_
    assert state["finalOutput"] == hist.final["finalOutput"], where_
    assert state["steps"] == hist.final["steps"] == len(NODES), where_
    assert new[-1]["type"] == "run_completed"


CHUNKS = 12  # the offsets are dealt round-robin, so xdist workers share them evenly


def _complete_lines(hist: History, offset: int) -> int:
    return max(i for i, end in enumerate(hist.ends) if end <= offset)


@pytest.mark.slow  # a sweep: a resume per byte of the trace
@pytest.mark.timeout(120)
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_resume_after_a_crash_at_every_byte_offset(history: History, chunk: int) -> None:
    """Every offset ``k`` of the trace (``k % CHUNKS == chunk``), with the newest
    projection a crash there can leave: ``state.json`` is written only after
    its trace line was appended, so it holds every complete line before ``k``
    (a cut on a line boundary may also leave it one line behind: see below).
    """
    offsets = range(chunk, len(history.trace) + 1, CHUNKS)
    assert len(offsets) > 0
    for offset in offsets:
        _check_resume(history, offset, _complete_lines(history, offset))


@pytest.mark.timeout(120)
def test_resume_with_an_older_projection_at_every_line_boundary(history: History) -> None:
    """A crash between an append and its projection leaves the projection behind the
    trace; any older projection is tried too (lines past it are dropped and rerun)."""
    checked = 0
    for line in range(1, LINES + 1):
        for older in range(line):
            _check_resume(history, history.ends[line], older)
            checked += 1
    assert checked == LINES * (LINES + 1) // 2


def test_the_history_is_the_expected_one(history: History) -> None:
    types = [e["type"] for e in history.events]
    assert types == ["run_started"] + ["node_started", "node_finished"] * 3 + ["run_completed"]
    assert json.loads(history.snaps[0][0])["traceSeq"] == 0
    # The projection (state.json with its journal folded on) after every transition.
    assert [fold(json.loads(s), j)["traceSeq"] for s, j, _ in history.snaps] == \
        list(range(LINES + 1))
