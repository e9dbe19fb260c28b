"""The projection's journal (``state.ndjson``): flat per-step writes, exact folds, crashes.

A chain of distinct nodes grows the projection with every node. Each event
that keeps the run's status is one journal line; the bytes written per
step must not grow with the run, the folded projection must equal the
engine's, and a crash at any byte of a journal line must resume to the
uninterrupted result with every node finished exactly once.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pi_workflows import compute, define_workflow, edge
from pi_workflows.protocol import atomic as atomic_mod
from pi_workflows.protocol import bundlewriter as writer_mod
from pi_workflows.protocol.artifacts import externalize
from pi_workflows.protocol.bundle import Bundle
from pi_workflows.protocol.statelog import LOG_NAME
from pi_workflows.protocol.store import Store
from pi_workflows.worker.engine import Engine

from tests.helpers.engine import Crash, Direct, assert_well_formed, crash_on, fast_dir


def _chain(n: int) -> Any:
    # About 120 bytes of output per node: journal mode starts after ~40 nodes.
    nodes = [compute(f"n{i}", lambda ctx, i=i: {"i": i, "pad": "x" * 80}) for i in range(n)]
    return define_workflow(name="chain", start_at="n0", max_steps=n + 1, nodes=nodes,
                           edges=[edge(f"n{i}", f"n{i + 1}") for i in range(n - 1)])


def _direct(store: Store, root: Path, n: int, name: str = "00000001") -> Direct:
    direct = Direct(store, root / "runs", f"20260101T000000Z-log-{name}", _chain(n), root)
    direct.enqueue()
    return direct


def _projection_bytes_written(root: Path, n: int, monkeypatch: pytest.MonkeyPatch) -> int:
    written = Counter[str]()
    real_atomic, real_append = atomic_mod.write_atomic, writer_mod.append_line

    def counting_atomic(path: Path, data: bytes, **kw: Any) -> None:
        written[path.name] += len(data)
        real_atomic(path, data, **kw)

    def counting_append(path: Path, line: bytes, **kw: Any) -> None:
        written[path.name] += len(line)
        real_append(path, line, **kw)

    monkeypatch.setattr(atomic_mod, "write_atomic", counting_atomic)
    monkeypatch.setattr(writer_mod, "append_line", counting_append)
    with Store(root / "s.sqlite3") as store:
        assert _direct(store, root, n).start().run() == "completed"
    monkeypatch.undo()
    return written["state.json"] + written[LOG_NAME]


@pytest.mark.timeout(120)
def test_projection_bytes_written_per_step_do_not_grow_with_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with fast_dir(tmp_path / "fast") as root:
        small = _projection_bytes_written(root / "small", 150, monkeypatch)
        large = _projection_bytes_written(root / "large", 600, monkeypatch)
    # Linear in the run's length (4x the steps): a full rewrite per event would be ~16x.
    assert large < 6 * small, (small, large)


def test_the_folded_projection_is_the_engines_after_every_event(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite3") as store:
        direct = _direct(store, tmp_path, 120)
        engine = direct.start()
        bundle = engine.writer.bundle
        append = engine.writer.append
        checked = []

        def checking(*args: Any, **kwargs: Any) -> int:
            seq = append(*args, **kwargs)
            checked.append(seq)
            return seq

        engine.writer.append = checking  # type: ignore[method-assign]
        real_transition = engine._transition

        def compare(*args: Any, **kwargs: Any) -> None:
            real_transition(*args, **kwargs)
            expected = externalize(dict(engine.state), bundle.artifacts.put)
            got = dict(bundle.raw_state())
            assert got.pop("traceSeq") == checked[-1]
            got.pop("updatedAt")
            assert got == expected

        engine._transition = compare  # type: ignore[method-assign]
        assert engine.run() == "completed"
        assert bundle.state_log_path.exists()  # the journal was in use (emptied at the end)
        events = assert_well_formed(bundle)
        assert [e["nodeId"] for e in events if e["type"] == "node_finished"] == [
            f"n{i}" for i in range(120)]


def _finished_once(bundle: Bundle, n: int) -> None:
    events = assert_well_formed(bundle)
    finished = Counter(e["nodeId"] for e in events if e["type"] == "node_finished")
    assert finished == Counter({f"n{i}": 1 for i in range(n)})
    state = bundle.state()
    assert state["status"] == "completed"
    assert state["finalOutput"] == {"i": n - 1, "pad": "x" * 80}
    assert len(state["outputs"]) == n


@pytest.mark.parametrize("after", [False, True])
def test_a_crash_at_a_journal_write_resumes_without_loss_or_repeat(
        tmp_path: Path, after: bool) -> None:
    with Store(tmp_path / "s.sqlite3") as store:
        direct = _direct(store, tmp_path, 90)
        engine = direct.start(fsync="node")
        crash_on(engine, "node_finished", node_id="n70", after=after)
        with pytest.raises(Crash):
            engine.run()
        bundle = engine.writer.bundle
        assert bundle.state_log_path.stat().st_size > 0  # n70 is past journal mode's start
        assert (bundle.raw_state()["lastNode"] == "n70") is after
        resumed = direct.resume(fsync="node")
        assert resumed.run() == "completed"
        _finished_once(bundle, 90)


def _journal_snapshots(direct: Direct) -> tuple[Engine, list[tuple[bytes, bytes, int]]]:
    """(state.json, state.ndjson, trace length) after every event written as a journal line."""
    engine = direct.start()
    bundle = engine.writer.bundle
    append = engine.writer.append
    snaps: list[tuple[bytes, bytes, int]] = []

    def snapping(*args: Any, **kwargs: Any) -> int:
        seq = append(*args, **kwargs)
        log = bundle.state_log_path.read_bytes() if bundle.state_log_path.exists() else b""
        if log:
            snaps.append((bundle.state_path.read_bytes(), log, len(bundle.trace_path.read_bytes())))
        return seq

    engine.writer.append = snapping  # type: ignore[method-assign]
    assert engine.run() == "completed"
    return engine, snaps


@dataclass
class Journal:
    """One uninterrupted run's journal snapshots, and the files a crash copy is built from."""

    direct: Direct
    snaps: list[tuple[bytes, bytes, int]]
    trace: bytes
    workflow_json: bytes
    manifest: bytes
    scratch: Path
    cuts: list[tuple[int, int]]  # (snapshot, journal bytes kept): every crash point tried


JOURNAL_NODES = 60
CUT_STRIDE = 7  # every 7th byte of each new journal line, and its end
CUT_CHUNKS = 12  # the cuts are dealt round-robin, so xdist workers share them evenly


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Journal]:
    base = tmp_path_factory.mktemp("journal")
    # Hundreds of resumes under one claim: a lease that outlasts a loaded machine.
    with fast_dir(base / "fast") as root, \
            Store(root / "s.sqlite3", lease_ms=3_600_000) as store:
        direct = _direct(store, root / "orig", JOURNAL_NODES)
        engine, snaps = _journal_snapshots(direct)
        bundle = engine.writer.bundle
        assert len(snaps) > 10
        cuts: list[tuple[int, int]] = []
        prev_log = b""
        for i, (_, log, _) in enumerate(snaps[:12]):
            start = len(prev_log) if log.startswith(prev_log) else 0
            prev_log = log
            cuts.extend((i, cut) for cut in range(start, len(log) + 1, CUT_STRIDE))
        yield Journal(direct, snaps, bundle.trace_path.read_bytes(),
                      bundle.workflow_path.read_bytes(), bundle.manifest_path.read_bytes(),
                      root, cuts)


@pytest.mark.slow  # a sweep: hundreds of resumes
@pytest.mark.timeout(120)
@pytest.mark.parametrize("chunk", range(CUT_CHUNKS))
def test_a_crash_at_every_byte_of_journal_lines_resumes_to_the_same_result(
        journal: Journal, chunk: int) -> None:
    """The cuts ``k`` with ``k % CUT_CHUNKS == chunk`` of the list of every crash point."""
    mine = journal.cuts[chunk::CUT_CHUNKS]
    assert mine
    direct = journal.direct
    for snap, cut in mine:
        state_json, log, trace_len = journal.snaps[snap]
        where = journal.scratch / f"copy-{chunk}"
        shutil.rmtree(where, ignore_errors=True)
        bdir = where / "runs" / direct.run_id
        (bdir / "artifacts").mkdir(parents=True)
        (bdir / "session").mkdir()
        (bdir / "workflow.json").write_bytes(journal.workflow_json)
        (bdir / "manifest.json").write_bytes(journal.manifest)
        (bdir / "state.json").write_bytes(state_json)
        (bdir / LOG_NAME).write_bytes(log[:cut])
        (bdir / "trace.ndjson").write_bytes(journal.trace[:trace_len])
        resumed = direct.resume(runs=where / "runs")
        assert resumed.run() == "completed", (snap, cut)
        _finished_once(Bundle(where / "runs", direct.run_id), JOURNAL_NODES)

