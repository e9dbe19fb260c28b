"""Run bundles: the on-disk record of one run, and reading it.

Owns the bundle layout (manifest, definition snapshot, projection, trace,
processes, session/, artifacts/, output.ndjson) and every read of it:
``Bundle`` (the files, the projection folded with its journal, the trace's
longest valid prefix), the bundle errors, and listing a runs directory.
Writing is ``protocol.bundlewriter``, which the readers on the command
line's path never load. Imports protocol modules only; never the engine,
never the writer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

from .artifacts import ArtifactDir, internalize
from .atomic import read_json
from .errors import PiWorkflowsError, UsageError
from .jsonenc import complete_lines
from .limits import validate_run_id
from .record import record
from .runstate import RunState
from .statelog import LOG_NAME, fold

BUNDLE_SCHEMA = "pi-workflows.bundle.v1"


class BundleCorrupt(PiWorkflowsError):
    code = "bundle_corrupt"


class BundleMissing(BundleCorrupt):
    """The run had a bundle and it is gone: never made again from scratch."""

    code = "bundle_missing"


class BundleExists(BundleCorrupt):
    """``create`` found a bundle (another writer laid it out first): resume it instead."""

    code = "bundle_exists"


@record(frozen=True)
class TraceScan:
    """The longest valid prefix of a trace: lines with seq 1..n, each complete JSON."""

    events: list[dict[str, Any]]
    valid_bytes: int
    total_bytes: int


def scan_trace(data: bytes) -> TraceScan:
    events: list[dict[str, Any]] = []
    offset = 0
    for event, after in complete_lines(data):
        if not isinstance(event, dict) or event.get("seq") != len(events) + 1:
            break
        events.append(event)
        offset = after
    return TraceScan(events, offset, len(data))


class Bundle:
    """Read access to one run's directory (no lock, no claim needed)."""

    def __init__(self, runs_dir: Path, run_id: str) -> None:
        self.run_id = validate_run_id(run_id)
        self.dir = runs_dir / run_id
        self.manifest_path = self.dir / "manifest.json"
        self.workflow_path = self.dir / "workflow.json"
        self.state_path = self.dir / "state.json"
        self.state_log_path = self.dir / LOG_NAME  # deltas on top of state.json
        self.trace_path = self.dir / "trace.ndjson"
        self.processes_path = self.dir / "processes.json"
        self.session_dir = self.dir / "session"
        self.output_path = self.dir / "output.ndjson"  # shell output while it runs
        self.artifacts = ArtifactDir(self.dir / "artifacts")

    def exists(self) -> bool:
        """A bundle exists once its projection does (it is written at creation)."""
        return self.state_path.is_file()

    def _read(self, path: Path) -> dict[str, Any]:
        try:
            data = read_json(path)
        except FileNotFoundError:
            raise BundleCorrupt(f"run {self.run_id} has no {path.name}") from None
        except (OSError, ValueError, RecursionError) as exc:
            raise BundleCorrupt(f"run {self.run_id}: {path.name} is unreadable"
                                f" ({type(exc).__name__})") from None
        if not isinstance(data, dict):
            raise BundleCorrupt(f"run {self.run_id}: {path.name} is not a JSON object")
        return data

    def manifest(self) -> dict[str, Any]:
        return dict(self._read(self.manifest_path))

    def snapshot(self) -> dict[str, Any]:
        return dict(self._read(self.workflow_path))

    def raw_state(self) -> RunState:
        """The projection as stored (``state.json`` plus its journal): large strings
        are still artifact references."""
        base = dict(self._read(self.state_path))
        try:
            log = self.state_log_path.read_bytes()
        except FileNotFoundError:
            return cast(RunState, base)
        except OSError as exc:
            raise BundleCorrupt(f"run {self.run_id}: {LOG_NAME} is unreadable"
                                f" ({type(exc).__name__})") from None
        return cast(RunState, fold(base, log))

    def state(self) -> RunState:
        """The projection with artifact references resolved."""
        raw = self.raw_state()
        try:
            return cast(RunState, dict(internalize(raw, self.artifacts.get)))
        except (OSError, ValueError) as exc:
            raise BundleCorrupt(f"run {self.run_id}: an artifact of state.json is missing or"
                                f" unreadable ({exc})") from None

    def scan(self) -> TraceScan:
        try:
            data = self.trace_path.read_bytes()
        except FileNotFoundError:
            data = b""
        return scan_trace(data)

    def events(self) -> list[dict[str, Any]]:
        """Trace events up to the projection's ``traceSeq`` (what happened)."""
        limit = int(self.raw_state().get("traceSeq", 0))
        return [e for e in self.scan().events if e["seq"] <= limit]

    def processes(self) -> dict[str, Any]:
        """``processes.json`` with only well-formed entries; anything else reads as none.

        It is never fsynced and only guides orphan reaping (every pid is
        identity-checked before a signal), so a damaged file must not stop a
        runner: its entries are skipped.
        """
        try:
            data = read_json(self.processes_path)
        except (OSError, ValueError):
            return {}
        entries = data.get("processes") if isinstance(data, dict) else None
        if not isinstance(entries, list):
            return {}
        return {**data, "processes": [e for e in entries if isinstance(e, dict)]}


def bundle_exists(runs_dir: Path, run_id: str) -> bool:
    return Bundle(runs_dir, run_id).exists()


def list_bundles(runs_dir: Path) -> list[str]:
    try:
        names = os.listdir(runs_dir)
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        raise UsageError(f"the runs directory {runs_dir} is not a directory"
                         " (PI_WORKFLOWS_RUNS_DIR)", code="runs_dir_invalid") from None
    return sorted(n for n in names if (runs_dir / n / "state.json").is_file())
