"""What the checker may look at: a drill project's durable state, read back.

Owns ``Durable`` (plain data, so tests build bad states by hand) and
``collect``, which fills it from disk only: the store's queue rows, feed,
effects and watermarks (through the store's read API), each bundle's raw
trace bytes and projection, the ledger, the drill's delivery journal, the
Pi session files of in-session runs (their step messages, accepted submits
and deferred turns), the controller resources with their last events and
effect records and the controller's ledger, the
live processes that carry the project's run marker (psutil) and the modes of
every file and directory under the project's state directory. Nothing here
asks a running process anything. Imports ``protocol``; never the worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from ...protocol.bundle import Bundle
from ...protocol.limits import validate_run_id
from ...protocol.paths import Paths, project_key
from ...protocol.store import Store
from ...protocol.wire import MARKER_ENV, parse_marker


@dataclass
class RunFacts:
    run_id: str
    row: dict[str, Any] | None = None  # state, originSession, parentRunId, startedAt, errorCode
    feed: list[dict[str, Any]] = field(default_factory=list)  # {"seq", "type", "payload"}
    trace: bytes | None = None  # None: no bundle
    # The trace as read just before the projection (None: not read so): what
    # the projection may lag by at most one line.
    trace_before: bytes | None = None
    state: dict[str, Any] | None = None  # the raw projection; None: none readable
    effects: list[dict[str, Any]] = field(default_factory=list)  # nodeId effectKey state ...


@dataclass
class Durable:
    runs: dict[str, RunFacts] = field(default_factory=dict)
    launched: list[str] = field(default_factory=list)  # run ids the drill was given
    ledger: list[str] = field(default_factory=list)  # read after the store
    # Read before the store: a line there has its effect record in what the store showed
    # (records are written before the effect runs); None: the same as ``ledger``.
    ledger_before: list[str] | None = None
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    # Turn intents in the store: {"intentId", "sessionId", "runId", "state"}.
    intents: list[dict[str, Any]] = field(default_factory=list)
    watermarks: dict[str, int] = field(default_factory=dict)
    marked: list[dict[str, Any]] = field(default_factory=list)  # {"pid", "cmd", "marker"}
    loose: list[dict[str, Any]] = field(default_factory=list)  # {"path", "mode", "kind"}
    # Hosts that exited without the drill stopping them: {"pid", "code"} (filled by the
    # drill, which alone knows whom it killed or drained).
    host_exits: list[dict[str, Any]] = field(default_factory=list)
    # Lines of the drill's logs that show a full disk as a raw exception (a traceback).
    disk_full_noise: list[str] = field(default_factory=list)
    # The Pi sessions of in-session runs, each file read back (``conversation``).
    conversations: list[dict[str, Any]] = field(default_factory=list)
    # The controller resources in the store, each {"controller", "key", "uid",
    # "resourceVersion", "generation", "deletionRequested", "finalizers", "status",
    # "events": [{"type", "uid", "data"}] (its last events, oldest first)}.
    resources: list[dict[str, Any]] = field(default_factory=list)
    # Their reconcile effect records: {"controller", "key", "effectKey", "kind",
    # "generation", "state"} (a deleted resource's go with it).
    ctl_effects: list[dict[str, Any]] = field(default_factory=list)
    # The controller's ledger (``ctl-ledger.txt``), read after the store.
    ctl_ledger: list[str] = field(default_factory=list)


# The drill's controller and the workflow it starts as a child (``ctlwork``): a child
# run may fail ``interrupted`` when its worker or host is killed (a new attempt follows).
CONTROLLER, CONTROLLER_CHILD = "ledger", "ctlchild"
CTL_LEDGER = "ctl-ledger.txt"
RESOURCE_EVENTS = 50


def _resources(store: Store, durable: Durable) -> None:
    for listed in store.list_resources(limit=100_000):
        # Its events before the resource: a status write the events show is in the
        # resource read after them (a later write may be in neither, or in both).
        events = store.resource_events(listed.controller, listed.key, limit=RESOURCE_EVENTS)
        res = store.get_resource(listed.controller, listed.key)
        if res is None:
            continue
        durable.resources.append({
            "controller": res.controller, "key": res.key, "uid": res.uid,
            "resourceVersion": res.resource_version, "generation": res.generation,
            "deletionRequested": res.deletion_requested, "finalizers": list(res.finalizers),
            "status": res.status,
            "events": [{"type": e.type, "uid": e.uid, "data": e.data} for e in events]})
        durable.ctl_effects += [{"controller": e.controller, "key": e.key,
                                 "effectKey": e.effect_key, "kind": e.kind,
                                 "generation": e.generation, "state": e.state}
                                for e in store.reconcile_effects(res.controller, res.key)]


CUSTOM_TYPE = "pi-workflows"  # the extension's custom messages


def conversation(path: Path) -> dict[str, Any]:
    """What one Pi session file shows of pi-workflows, in file order.

    ``steps``: attempt -> {"runId", "step"} of every step message and reminder;
    ``accepted``: the attempt of every ``workflow`` submit the tool answered
    without an error (the worker accepted it); ``followUps``: the intent id of
    every deferred turn delivered into the conversation (``details.intentId``),
    with ``followUpRuns`` naming each one's run.
    """
    out: dict[str, Any] = {"file": path.name, "steps": {}, "accepted": [], "followUps": [],
                           "followUpRuns": {}}
    for line in _lines(path):
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a torn last line of a Pi killed mid-write
        if not isinstance(entry, dict):
            continue
        message = entry.get("message") if entry.get("type") == "message" else entry
        if not isinstance(message, dict):
            continue
        raw = message.get("details")
        details: dict[str, Any] = raw if isinstance(raw, dict) else {}
        custom = entry.get("type") == "custom_message" or message.get("role") == "custom"
        if custom and message.get("customType") == CUSTOM_TYPE:
            if details.get("kind") in ("step", "remind") and details.get("attempt"):
                out["steps"][str(details["attempt"])] = {"runId": details.get("runId"),
                                                         "step": details.get("step")}
            if details.get("intentId"):
                out["followUps"].append(str(details["intentId"]))
                out["followUpRuns"][str(details["intentId"])] = details.get("runId")
        elif message.get("role") == "toolResult" and message.get("toolName") == "workflow" \
                and not message.get("isError") and details.get("action") == "submit":
            out["accepted"].append(str(details.get("attempt")))
    return out


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []


def marked_processes(project: Path) -> list[dict[str, Any]]:
    """Live (not zombie) processes whose run marker names this project."""
    key, me, out = project_key(project), os.getpid(), []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if proc.pid == me or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            marker = proc.environ().get(MARKER_ENV)
            if parse_marker(marker, key) is not None:
                out.append({"pid": proc.pid, "cmd": " ".join(proc.cmdline())[:120],
                            "marker": marker})
    return out


# How an OSError of a full disk looks when something printed it raw, not as our one line.
RAW_DISK_FULL = ("[Errno 28]", "[Errno 122]")


def disk_full_noise(work: Path) -> list[str]:
    """Lines of the drill's logs (hosts, workers, commands) with a raw disk-full OSError."""
    out = []
    for log in sorted(work.glob("*.log")):
        with contextlib.suppress(OSError), open(log, errors="replace") as fh:
            out += [f"{log.name}: {line.strip()[:200]}" for line in fh
                    if any(raw in line for raw in RAW_DISK_FULL)]
    return out


def loose_modes(root: Path) -> list[dict[str, Any]]:
    """Directories looser than 0700 and files looser than 0600 under ``root``."""
    out = []
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = os.path.join(folder, name)
            with contextlib.suppress(FileNotFoundError):
                info = os.lstat(path)
                kind = "dir" if stat.S_ISDIR(info.st_mode) else \
                    "file" if stat.S_ISREG(info.st_mode) else None
                if kind is not None and info.st_mode & 0o077:
                    out.append({"path": path, "mode": oct(info.st_mode & 0o777), "kind": kind})
    return out


def _facts(store: Store, runs_dir: Path, run_id: str) -> RunFacts:
    facts = RunFacts(run_id)
    row = store.get(run_id)
    if row is not None:
        facts.row = {"state": str(row.state), "workflow": row.workflow,
                     "originSession": row.origin_session,
                     "notifySession": row.notify_session, "parentRunId": row.parent_run_id,
                     "startedAt": row.started_at, "errorCode": row.error_code,
                     "errorMessage": row.error_message}
        facts.effects = [{"nodeId": e.node_id, "effectKey": e.effect_key, "state": e.state,
                          "attemptId": e.attempt_id, "updatedAt": e.updated_at}
                         for e in store.list_effects(run_id)]
    bundle = Bundle(runs_dir, run_id)
    if bundle.dir.is_dir():
        # Trace, projection, trace again. A writer appends its trace line
        # before the projection's, so the trace read after the projection holds
        # every line the projection counts (fewer would be lost lines), and the
        # projection read after the first trace holds all but the last of its
        # lines (more behind would be a lagging projection). Judged from one
        # read alone, a run that goes on meanwhile looks broken either way.
        with contextlib.suppress(OSError):
            facts.trace_before = bundle.trace_path.read_bytes()
        with contextlib.suppress(Exception):  # unreadable: the checker says so
            facts.state = _projection(bundle)
        with contextlib.suppress(OSError):
            facts.trace = bundle.trace_path.read_bytes()
        if facts.trace is None:
            facts.trace = b""
    return facts


def _projection(bundle: Bundle) -> dict[str, Any]:
    """The projection as of one moment: ``state.json`` not replaced while it was read.

    A full rewrite renames a new ``state.json`` in and then empties the
    journal; a read across the two folds nothing onto the old file (the
    journal's next line is not its next seq), which is valid but older than
    the trace read just before it. Read again then, as a reader that wants
    the newest would.
    """
    state: dict[str, Any] = {}
    for _ in range(20):
        before = os.stat(bundle.state_path).st_ino
        state = dict(bundle.raw_state())
        if os.stat(bundle.state_path).st_ino == before:
            break
    return state


def collect(paths: Paths, launched: list[str], work: Path, ledger: Path,
            only: set[str] | None = None, processes: bool = False,
            pi_sessions: Path | None = None) -> Durable:
    """Read the durable state of the runs in ``only`` (default: every run), and the Pi
    session files under ``pi_sessions``."""
    # The ledger is read on both sides of the store: an effect applied while we read
    # has its line in the second read, one begun while we read may be in neither.
    durable = Durable(launched=list(launched), ledger_before=_lines(ledger))
    for line in _lines(work / "deliveries.ndjson"):
        with contextlib.suppress(ValueError):
            durable.deliveries.append(json.loads(line))
    with Store(paths.store_file) as store:
        rows = store.list_runs(limit=1_000_000)
        ids = {r.run_id for r in rows}
        if paths.runs_dir.is_dir():
            for entry in paths.runs_dir.iterdir():
                with contextlib.suppress(Exception):
                    ids.add(validate_run_id(entry.name))
        if only is not None:
            ids &= only
        for run_id in sorted(ids):
            durable.runs[run_id] = _facts(store, paths.runs_dir, run_id)
        after = 0
        while batch := store.events_since(after, limit=5000):
            for event in batch:
                if event.run_id in durable.runs:
                    durable.runs[event.run_id].feed.append(
                        {"seq": event.seq, "type": event.type, "payload": event.payload})
            after = batch[-1].seq
        sessions = {r.origin_session for r in rows} | {r.notify_session for r in rows} | \
            {str(d.get("session")) for d in durable.deliveries}
        for session in sorted(s for s in sessions if s):
            durable.watermarks[session] = store.watermark(session)
        durable.intents = [{"intentId": t.intent_id, "sessionId": t.session_id,
                            "runId": t.run_id, "state": t.state}
                           for t in store.list_turn_intents()]
        _resources(store, durable)
    durable.ledger = _lines(ledger)
    durable.ctl_ledger = _lines(paths.project / CTL_LEDGER)
    if pi_sessions is not None and pi_sessions.is_dir():
        durable.conversations = [conversation(p) for p in sorted(pi_sessions.rglob("*.jsonl"))]
    durable.loose = loose_modes(paths.state_dir)
    if paths.state_dir not in paths.runs_dir.parents:  # on a disk of its own (the drill's tmpfs)
        durable.loose += loose_modes(paths.runs_dir)
    if processes:
        durable.marked = marked_processes(paths.project)
        durable.disk_full_noise = disk_full_noise(work)
    return durable
