"""The engine harness shared by the worker, bundle, settle and fork tests.

Owns ``Harness``, a project with workflow files, a real store (real clock)
and a runs directory, driven through the queue and ``execute_claim``
exactly as a runner does (the ``h`` fixture in ``tests/conftest.py`` makes
one per test); ``Direct``, which drives an ``Engine`` over an in-memory
definition for the fast, many-iteration tests; crash injection
(``crash_on``), trace checks and ``fast_dir``. ``GATES`` is a registry that
workflow files loaded in this process reach as ``h.GATES[...]`` (their
``HEADER`` imports this module as ``h``), for events and counters owned by
a test.

Everything here is importable by spawned child processes: it must not
import pytest, a conftest or a test module.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pi_workflows.protocol.bundle import Bundle
from pi_workflows.protocol.bundlewriter import BundleWriter
from pi_workflows.protocol.definitions.discovery import discover
from pi_workflows.protocol.definitions.graph import Workflow, definition_digest
from pi_workflows.protocol.store import QueueRow, RunSource, Store
from pi_workflows.supervisor.session.launch import prepare_continuation, prepare_run
from pi_workflows.worker.control import Control
from pi_workflows.worker.engine import Engine
from pi_workflows.worker.runner import RunOutcome, execute_claim

from .clocks import FakeClock, LaterClock

ROOT = Path(__file__).resolve().parents[2]
HEADER = (
    "from pi_workflows import action, agent, checkpoint, compute, define_workflow, edge,"
    " notify, shell, switch\n"
    "from tests.helpers import engine as h\n"
)
# Test-owned objects that workflow files reach with ``h.GATES[...]``.
GATES: dict[str, Any] = {}


@contextlib.contextmanager
def fast_dir(fallback: Path) -> Iterator[Path]:
    """A scratch directory on tmpfs when there is one (the many-copy tests), else ``fallback``.

    On ext4 every rename over an existing file flushes data (auto_da_alloc),
    which makes a loop of thousands of bundle copies slow without testing
    anything more.
    """
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        path = Path(tempfile.mkdtemp(prefix="piwf-engine-", dir=shm))
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
    else:
        fallback.mkdir(parents=True, exist_ok=True)
        yield fallback


def trace_events(bundle: Bundle) -> list[dict[str, Any]]:
    """Every line of the trace file, parsed (fails on a torn or invalid line)."""
    lines = bundle.trace_path.read_bytes().split(b"\n")
    assert lines[-1] == b"", "the trace does not end with a newline"
    return [json.loads(line) for line in lines[:-1]]


def types_of(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def assert_well_formed(bundle: Bundle) -> list[dict[str, Any]]:
    """Seqs contiguous from 1, projection at the last seq, first event run_started."""
    events = trace_events(bundle)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert bundle.raw_state()["traceSeq"] == len(events)
    assert events[0]["type"] == "run_started"
    return events


def file_lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def bundle_bytes(bundle: Bundle) -> dict[str, bytes]:
    """Every file of a bundle (lock file aside), for byte-identity checks."""
    out = {}
    for path in sorted(bundle.dir.rglob("*")):
        if path.is_file() and path.name != ".bundle.lock":
            out[str(path.relative_to(bundle.dir))] = path.read_bytes()
    return out


class Crash(BaseException):
    """Stands in for the process dying at a chosen point (nothing catches it)."""


def crash_on(engine: Engine, event_type: str, *, node_id: str | None = None,
             after: bool = False, effect: str | None = None) -> None:
    """Make the engine's writer die at one append: before it, or right after it."""
    writer = engine.writer
    append = writer.append

    def dying(etype: str, payload: dict[str, Any], state: dict[str, Any], **kw: Any) -> int:
        hit = etype == event_type and (node_id is None or kw.get("node_id") == node_id) and (
            effect is None or payload.get("effect") == effect)
        if hit and not after:
            raise Crash(f"before {etype}")
        seq = append(etype, payload, state, **kw)
        if hit:
            raise Crash(f"after {etype}")
        return seq

    writer.append = dying  # type: ignore[method-assign]


# ---- through the queue, as a runner does ---------------------------------------


@dataclass
class Harness:
    root: Path
    lease_ms: int = 60_000
    store: Store = field(init=False)

    def __post_init__(self) -> None:
        self.project = self.root / "project"
        self.runs = self.root / "runs"
        self.workflows = self.project / ".pi" / "workflows"
        self.workflows.mkdir(parents=True, exist_ok=True)
        self.store_path = self.root / "state" / "store.sqlite3"
        self.store = Store(self.store_path, lease_ms=self.lease_ms)

    def close(self) -> None:
        self.store.close()

    def write(self, name: str, body: str) -> Path:
        path = self.workflows / f"{name}.workflow.py"
        path.write_text(HEADER + textwrap.dedent(body).lstrip())
        return path

    def launch(self, name: str, run_input: Any = None, *, session: str | None = None) -> str:
        catalog = discover(self.project, self.root / "global")
        prepared = prepare_run(catalog, name, {} if run_input is None else run_input)
        if session is None:
            self.store.enqueue_detached(prepared.run_id, prepared.source, prepared.input)
        else:
            self.store.reserve(prepared.run_id, prepared.source, prepared.input, session)
        return prepared.run_id

    def answer(self, parent_run_id: str, answer: Any, *, force: bool = False) -> str:
        prepared = prepare_continuation(self.runs, parent_run_id, answer, force=force)
        self.store.enqueue_detached(prepared.run_id, prepared.source, prepared.input,
                                    parent_run_id=parent_run_id)
        return prepared.run_id

    def execute(self, run_id: str, *, session: str | None = None, runner: str = "runner-1",
                **kwargs: Any) -> RunOutcome:
        claim = self.store.claim_by_id(run_id, runner, session=session)
        kwargs.setdefault("fsync", "never")
        return execute_claim(self.store, claim, runs_dir=self.runs, project_dir=self.project,
                             **kwargs)

    def after_crash(self, run_id: str, **kwargs: Any) -> RunOutcome:
        """What a new runner does once it watched a crashed owner's claim go a lease
        without renewal (its own monotonic time, here a clock the test moves):
        claim and resume."""
        mono = FakeClock(0.0)
        with Store(self.store_path, lease_ms=self.lease_ms,
                   clock=LaterClock(self.lease_ms + 1), monotonic=mono) as later:
            later.watch_claims()
            mono.advance(self.lease_ms / 1000)
            claim = later.claim_by_id(run_id, "runner-2")
            kwargs.setdefault("fsync", "never")
            return execute_claim(later, claim, runs_dir=self.runs, project_dir=self.project,
                                 **kwargs)

    def bundle(self, run_id: str) -> Bundle:
        return Bundle(self.runs, run_id)

    def row(self, run_id: str) -> QueueRow:
        row = self.store.get(run_id)
        assert row is not None
        return row

    def state(self, run_id: str) -> dict[str, Any]:
        return self.bundle(run_id).state()


# ---- the engine over an in-memory definition ------------------------------------


SOURCE = {"path": "/memory/wf.workflow.py", "sha256": "cd" * 32}


@dataclass
class Direct:
    """One run driven straight through the engine; the store row only fences."""

    store: Store
    runs: Path
    run_id: str
    workflow: Workflow
    project: Path
    token: str = ""

    def enqueue(self) -> None:
        src = RunSource(self.workflow.name or "wf", SOURCE["path"], SOURCE["sha256"],
                        definition_digest(self.workflow))
        self.store.enqueue_detached(self.run_id, src, {})
        self.claim()

    def claim(self) -> str:
        claim = self.store.claim_by_id(self.run_id, "direct")
        self.store.mark_running(self.run_id, claim.token)
        self.token = claim.token
        return claim.token

    def park(self) -> None:
        self.store.park(self.run_id, self.token)

    def engine(self, *, control: Control | None = None, runs: Path | None = None,
               project: Path | None = None, fsync: str = "never") -> Engine:
        writer = BundleWriter(Bundle(runs or self.runs, self.run_id), self.store, self.token,
                              fsync=fsync)
        return Engine(self.workflow, writer, self.store, project_dir=project or self.project,
                      control=control, park_grace_s=0.5)

    def start(self, run_input: Any = None, **kwargs: Any) -> Engine:
        engine = self.engine(**kwargs)
        engine.create(run_input={} if run_input is None else run_input, source=SOURCE,
                      digest=definition_digest(self.workflow))
        return engine

    def resume(self, *, force: bool = False, **kwargs: Any) -> Engine:
        engine = self.engine(**kwargs)
        engine.reopen(source_sha256=SOURCE["sha256"], digest=definition_digest(self.workflow),
                      force=force)
        return engine


def gate() -> threading.Event:
    return threading.Event()
