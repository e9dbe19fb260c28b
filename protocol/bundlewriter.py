"""The fenced writer of a run bundle: every write, in its order, inside the run's fence.

Owns ``BundleWriter``: laying a bundle out, reopening it (with torn-tail
repair and compaction of the state journal), and the write order of every
transition (fence -> trace line -> state.json or its journal line ->
manifest), with the fsync policy (``BOUNDARY_EVENTS`` are made durable
before the next step under the default ``node`` policy). Imports protocol
modules (``protocol.bundle`` for the layout); never the engine.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .artifacts import externalize
from .atomic import append_line, fsync_dir, write_atomic, write_json_atomic
from .bundle import BUNDLE_SCHEMA, Bundle, BundleCorrupt, BundleExists, BundleMissing, scan_trace
from .clock import Clock, now_ms
from .diskfull import is_disk_full
from .fence import CancelPending, ClaimVerifier, PausePending, RunLock, bundle_lock, fenced
from .jsonenc import compact_json
from .paths import ensure_private_dir
from .record import record
from .runstate import RunState
from .statelog import COMPACT_FROM_BYTES, delta_line, fold_prefix
from .states import SETTLED_STATUSES, pause_pending

# (top-level changes, {"outputs"/"results": {node id: new entry}}) of one transition.
StateDelta = tuple[Mapping[str, Any], Mapping[str, Mapping[str, Any]]]
# With fsync policy "node", these events are made durable before the next step.
BOUNDARY_EVENTS = frozenset({
    "run_started", "node_started", "node_finished", "node_failed", "run_resumed",
    "run_completed", "run_waiting", "run_failed", "run_timed_out", "run_cancelled",
})


@record(frozen=True)
class RepairReport:
    kept_seq: int
    dropped_lines: int
    dropped_bytes: int
    rewritten: bool


class BundleWriter:
    """Every write to a bundle, each inside the run's fence."""

    def __init__(self, bundle: Bundle, store: ClaimVerifier, token: str, *,
                 fsync: str = "node", clock: Clock = now_ms,
                 lock_timeout: float | None = None) -> None:
        if fsync not in ("always", "node", "never"):
            raise ValueError(f"unknown fsync policy {fsync!r}")
        self.bundle = bundle
        self.store = store
        self.token = token
        self.fsync = fsync
        self.clock = clock
        self.seq = 0
        self._status: str | None = None
        self._manifest: dict[str, Any] = {}
        self._lock: RunLock | None = None
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the bundle dir
        self._full_bytes = 0  # size of the last full state.json write
        self._log_bytes = 0  # bytes in the journal since then
        self._log_entry_synced = False
        self.lock_timeout = lock_timeout  # None: PI_WORKFLOWS_LOCK_TIMEOUT_S
        # Events refused (``CancelPending``) once the fence's own claim check
        # sees a cancel request: the engine's gate, so that a run asked to
        # cancel never starts another node nor ends waiting or completed.
        self.cancel_gate: frozenset[str] = frozenset()
        # Likewise for a pause request (the row's ``paused`` code): the events
        # that would start the next node, so a pause asked for before a
        # boundary holds there even before the worker's next renewal.
        self.pause_gate: frozenset[str] = frozenset()
        # The last write that did not fit for want of space (the engine asks after
        # each node attempt: a write made from inside a node may have been swallowed).
        self.disk_full: OSError | None = None

    @contextlib.contextmanager
    def _fence(self) -> Iterator[object]:
        """The run's fence, on the very directory this writer started with.

        A bundle moved or deleted under a running writer must not be made
        again around it (with a trace that starts mid-way): the directory's
        identity is checked before the lock is taken and again inside it.
        """
        self._check_identity()
        try:
            if self._lock is None:
                self._lock = bundle_lock(self.bundle.dir, self.lock_timeout)
            with fenced(self.store, self.bundle.dir, self.bundle.run_id, self.token,
                        lock=self._lock) as verified:
                self._check_identity()
                yield verified
        except (NotADirectoryError, IsADirectoryError) as exc:
            # A bundle path that is a file, a lock file that is a directory:
            # rerunning cannot mend that.
            raise BundleCorrupt(f"run {self.bundle.run_id}: its bundle cannot be written"
                                f" ({type(exc).__name__}: {exc.filename})") from None
        except OSError as exc:
            if is_disk_full(exc):
                self.disk_full = exc
            raise

    def _check_identity(self) -> None:
        try:
            info = os.stat(self.bundle.dir)
        except FileNotFoundError:
            if self._identity is not None:
                raise BundleMissing(f"run {self.bundle.run_id}: its bundle directory was"
                                    " moved or deleted while the run ran") from None
            return
        identity = (info.st_dev, info.st_ino)
        if self._identity is None:
            self._identity = identity
        elif identity != self._identity:
            raise BundleMissing(f"run {self.bundle.run_id}: its bundle directory was replaced"
                                " while the run ran")

    def _sync(self, event_type: str) -> bool:
        return self.fsync == "always" or (self.fsync == "node" and event_type in BOUNDARY_EVENTS)

    def _externalize(self, value: Any, sync: bool) -> Any:
        self.bundle.artifacts.sync = sync
        return externalize(value, self.bundle.artifacts.put)

    def create(self, manifest: dict[str, Any], snapshot: dict[str, Any],
               state: Mapping[str, Any]) -> None:
        """Lay out a new bundle: snapshot (once), projection at seq 0, manifest."""
        b = self.bundle
        try:
            ensure_private_dir(b.dir)
        except NotADirectoryError:
            raise BundleCorrupt(f"run {b.run_id}: its bundle path {b.dir} is not a"
                                " directory") from None
        with self._fence():
            if b.exists():
                raise BundleExists(f"run {b.run_id} already has a bundle")
            ensure_private_dir(b.session_dir)
            ensure_private_dir(b.artifacts.path)
            sync = self.fsync != "never"
            # Files are fsynced one by one; the directory once, by the state.json
            # write below, which is what makes the bundle exist.
            write_json_atomic(b.workflow_path, snapshot, sync=sync, sync_dir=False)
            if not b.trace_path.exists():
                append_line(b.trace_path, b"", sync=False)
            now = self.clock()
            self._manifest = {
                **manifest, "schema": BUNDLE_SCHEMA, "runId": b.run_id, "createdAt": now,
                "paths": {"trace": "trace.ndjson", "state": "state.json",
                          "workflow": "workflow.json", "processes": "processes.json",
                          "session": "session", "artifacts": "artifacts"},
            }
            self.seq = 0
            # The manifest goes before the projection: a bundle exists once its
            # state.json does, and must then have its manifest. A crash before
            # state.json leaves no bundle, and the next claim creates it again.
            self._manifest.update({"status": state.get("status"), "updatedAt": now})
            write_json_atomic(b.manifest_path, self._manifest, sync=sync, sync_dir=False)
            self._status = state.get("status")
            self._write_state_and_manifest(state, sync=sync)

    @property
    def manifest(self) -> dict[str, Any]:
        return dict(self._manifest)

    def reopen(self) -> tuple[RunState, RepairReport]:
        """For a resume: inside one fence, load manifest and projection and repair the trace."""
        with self._fence():
            self._manifest = self.bundle.manifest()
            raw = self.bundle.raw_state()
            self._status = raw.get("status")
            if self._status in SETTLED_STATUSES:
                # A settled run is never resumed: leave every byte as it is, but
                # for a manifest that a crash left one status behind its projection.
                self.seq = int(raw.get("traceSeq", 0))
                if self._manifest.get("status") != self._status:
                    self._manifest.update({"status": self._status,
                                           "updatedAt": raw.get("updatedAt")})
                    write_json_atomic(self.bundle.manifest_path, self._manifest,
                                      sync=self.fsync != "never")
                return self.bundle.state(), RepairReport(self.seq, 0, 0, False)
            self._compact(raw)
            report = self._repair(raw)
            self._remove_stale_temp_files()
            return self.bundle.state(), report

    def _remove_stale_temp_files(self) -> None:
        # A writer killed between writing a temp file and renaming it leaves
        # ``.<name>.<pid>.tmp`` behind; the fence holder is the only writer.
        for path in self.bundle.dir.glob(".*.tmp"):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def _compact(self, raw: Mapping[str, Any]) -> None:
        """Make the journal safe to append to for a resumed writer.

        A journal whose lines all fold is kept as it is (a resume refused
        later changes no byte); one with a torn or stray tail is folded into
        ``state.json`` and emptied, so nothing is ever appended after a line
        a crash tore.
        """
        b = self.bundle
        self._full_bytes = self._stat_size(b.state_path)
        try:
            data = b.state_log_path.read_bytes()
        except FileNotFoundError:
            self._log_bytes = 0
            return
        _, valid = fold_prefix(dict(b._read(b.state_path)), data)
        if valid == len(data):
            self._log_bytes = len(data)
            return
        self._write_full(dict(raw), sync=self.fsync != "never")
        self._log_bytes = 0
        self._full_bytes = self._stat_size(b.state_path)

    @staticmethod
    def _stat_size(path: Path) -> int:
        try:
            return path.stat().st_size
        except FileNotFoundError:
            return 0

    def _write_full(self, stored: Mapping[str, Any], *, sync: bool) -> None:
        """Replace ``state.json``, then empty the journal it now contains."""
        b = self.bundle
        write_json_atomic(b.state_path, stored, sync=sync)
        self._full_bytes = self._stat_size(b.state_path)
        if self._log_bytes or b.state_log_path.exists():
            # Its lines are all at or before the new traceSeq: readers skip them
            # even if this truncation is lost.
            os.truncate(b.state_log_path, 0)
            self._log_bytes = 0

    def _write_state_and_manifest(self, state: Mapping[str, Any], *, sync: bool,
                                  delta: StateDelta | None = None) -> None:
        b = self.bundle
        now = self.clock()
        status = state.get("status")
        if delta is not None and status == self._status and b.state_path.exists():
            changes, merge = delta
            line = delta_line(self.seq, now, self._externalize(dict(changes), sync),
                              self._externalize({k: dict(v) for k, v in merge.items()}, sync))
            if self._log_bytes + len(line) <= max(self._full_bytes, COMPACT_FROM_BYTES):
                append_line(b.state_log_path, line, sync=sync)
                if sync and not self._log_entry_synced:
                    fsync_dir(b.dir)  # the journal's own directory entry, once
                    self._log_entry_synced = True
                self._log_bytes += len(line)
                return
        stored = self._externalize({**state, "traceSeq": self.seq, "updatedAt": now}, sync)
        # A full rewrite that empties a journal holding synced lines is synced too.
        self._write_full(stored, sync=sync or (self._log_bytes > 0 and self.fsync != "never"))
        if status != self._status or not b.manifest_path.exists():
            self._manifest.update({"status": status, "updatedAt": now})
            write_json_atomic(b.manifest_path, self._manifest, sync=sync)
            self._status = status

    def append(self, event_type: str, payload: dict[str, Any], state: Mapping[str, Any], *,
               node_id: str | None = None, attempt_id: str | None = None,
               delta: StateDelta | None = None) -> int:
        """One transition: fence, trace line, projection (with ``traceSeq``), manifest.

        ``delta`` is what changed from the previous ``state``: top-level
        changes, and per-entry patches of ``outputs``/``results``. With it, a
        large projection is written as one journal line instead of in full.
        """
        sync = self._sync(event_type)
        with self._fence() as verified:
            if event_type in self.cancel_gate and getattr(verified, "cancel_requested", False):
                raise CancelPending(f"run {self.bundle.run_id}: a cancel was requested")
            if event_type in self.pause_gate and pause_pending(
                    str(getattr(verified, "state", "")), getattr(verified, "error_code", None)):
                raise PausePending(f"run {self.bundle.run_id}: a pause was requested")
            seq = self.seq + 1
            event: dict[str, Any] = {"seq": seq, "at": self.clock(), "type": event_type,
                                     "runId": self.bundle.run_id}
            if node_id is not None:
                event["nodeId"] = node_id
            if attempt_id is not None:
                event["attemptId"] = attempt_id
            event["payload"] = self._externalize(payload, sync)
            append_line(self.bundle.trace_path, (compact_json(event) + "\n").encode(),
                        sync=sync)
            self.seq = seq
            self._write_state_and_manifest(state, sync=sync, delta=delta)
            return seq

    def _repair(self, raw: RunState) -> RepairReport:
        """Cut the trace back to its valid prefix, then to the projection's ``traceSeq``.

        The projection decides what happened: a line appended after the last
        projection write is dropped (its step reruns). The file is rewritten,
        atomically and (the caller holds the fence) only when something is cut.
        """
        b = self.bundle
        wanted = int(raw.get("traceSeq", 0))
        try:
            data = b.trace_path.read_bytes()
        except FileNotFoundError:
            data = b""
        scan = scan_trace(data)
        if len(scan.events) < wanted:
            raise BundleCorrupt(
                f"run {b.run_id}: the trace ends at seq {len(scan.events)} but the projection"
                f" is at seq {wanted}; the bundle lost data (fsync policy 'never'?)")
        keep = 0
        for _ in range(wanted):
            keep = data.index(b"\n", keep) + 1
        tail = data[keep:]
        dropped_lines = tail.count(b"\n") + (1 if tail and not tail.endswith(b"\n") else 0)
        rewritten = keep != len(data)
        if rewritten:
            write_atomic(b.trace_path, data[:keep], sync=self.fsync != "never")
        self.seq = wanted
        return RepairReport(wanted, dropped_lines, len(data) - keep, rewritten)

    def repin(self, source: dict[str, str], digest: str, payload: dict[str, Any],
              includes: dict[str, Any] | None = None) -> None:
        """Accept a changed workflow source: record it in the trace, then in the manifest.

        ``workflow.json`` keeps the definition the run started with; ``includes``
        (``{"includes": [...]}``) re-pins the files an include loaded.
        """
        state, _ = self.reopen()
        self.append("source_repinned", payload, state)
        with self._fence():
            self._manifest.update({"source": source, "digest": digest, **(includes or {}),
                                   "updatedAt": self.clock()})
            write_json_atomic(self.bundle.manifest_path, self._manifest,
                              sync=self.fsync != "never")

    def capture(self, records: list[dict[str, Any]]) -> None:
        """Append an agent conversation's capture to ``session/events.ndjson``.

        Fenced like every write; never fsynced (it is evidence for people, and
        the conversation itself is Pi's session file).
        """
        data = b"".join((compact_json(r) + "\n").encode() for r in records)
        with self._fence():
            append_line(self.bundle.session_dir / "events.ndjson", data, sync=False)

    def stream_output(self, records: list[dict[str, Any]]) -> None:
        """Append shell output as it is produced to ``output.ndjson`` (never fsynced:
        the step's result in the trace is the record; this is for people watching)."""
        data = b"".join((compact_json(r) + "\n").encode() for r in records)
        with self._fence():
            append_line(self.bundle.output_path, data, sync=False)

    def write_processes(self, processes: dict[str, Any]) -> None:
        # Never fsynced: after a power loss no recorded process is alive anyway.
        with self._fence():
            write_json_atomic(self.bundle.processes_path, processes, sync=False)
