"""Read-only views of runs: the queue row joined with the bundle, when there is one.

Owns the ``status --json`` shape, a run's chain (a waiting run, the
continuation that answered it, and so on: one logical run) and the one
human line per run, and with ``--debug`` the recorded traceback of its last
failed step. Works before a bundle exists (a queued launch) and never
shows private input. Imports ``protocol``, ``supervisor.views.timefmt`` and
(lazily, for ``--debug``) ``supervisor.views.steplogs``.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from ...protocol.bundle import Bundle, BundleCorrupt
from ...protocol.liveness import is_same_process
from ...protocol.states import (
    CLAIMED,
    PAUSED_CODE,
    QueueState,
    RunStatus,
    display_state,
    is_paused,
    pause_pending,
    seen_status,
)
from ...protocol.store import QueueRow, Store
from .decisions import status_fields
from .mounts import mount_note
from .progress import running_update
from .runtext import detail_suffix, text_fields, with_title
from .timefmt import ago, duration

MAX_CHAIN = 1000  # a chain is a list; the bound only guards against a damaged store


def run_status(row: QueueRow, runs_dir: Path,
               forks: list[str] | None = None) -> dict[str, Any]:
    """``forks``: the runs forked from this one (``Store.forks_of``), oldest first."""
    data: dict[str, Any] = {
        "runId": row.run_id, "workflow": row.workflow, "queueState": row.state,
        "runStatus": None, "currentNode": None, "waitingOn": None, "steps": None,
        "errorCode": row.error_code, "error": row.error_message, "finalOutput": None,
        "parentRunId": row.parent_run_id, "runnerId": row.runner_id,
        "createdAt": row.created_at, "updatedAt": row.updated_at,
        "startedAt": row.started_at, "finishedAt": row.finished_at,
        "cancelRequested": row.cancel_requested,
        # `pause`: held (no runner takes it until `resume`), or asked to hold at
        # the next node boundary.
        "paused": is_paused(row.state, row.error_code),
        "pauseRequested": pause_pending(row.state, row.error_code),
        "forkedFrom": row.forked_from, "forkNode": row.fork_node, "forks": list(forks or []),
        "title": None, "statusDetail": None,
    }
    bundle = Bundle(runs_dir, row.run_id)
    if not bundle.exists():
        return data
    try:
        state = bundle.state()
    except (BundleCorrupt, ValueError, OSError) as exc:
        data["bundleError"] = str(exc)
        return data
    error = state.get("error")
    status = seen_status(row.state, state.get("status"), row.cancel_requested)
    waiting = status == RunStatus.WAITING
    data.update({
        "runStatus": status, "currentNode": state.get("currentNode"),
        "waitingOn": state.get("waitingNode") if waiting else None,
        "steps": state.get("steps"), "finalOutput": state.get("finalOutput"),
        "summary": (state.get("waitingOutput") or {}).get("summary") if waiting else None,
        **text_fields(state, status),
    })
    data.update(status_fields(state, waiting))  # a human decision's request; who answered
    if data["errorCode"] is None and error:
        data["errorCode"], data["error"] = error.get("code"), error.get("message")
    return data


def host_running(store: Store) -> bool:
    """A host runner is registered and its process (pid and start time) is alive."""
    return any(r.kind == "host" and is_same_process(r.pid, r.pid_start_time)
               for r in store.list_runners())


def node_states(runs_dir: Path, run_id: str) -> list[dict[str, Any]]:
    """One entry per node of the run's workflow, in definition order: ``{"id", "state"}``
    (``done``, ``failed``, ``running``, ``waiting`` or ``pending``), and for the node in
    progress ``since`` (when the run last moved, ms). Empty without a readable bundle.
    Only node ids and states: never an output or the input."""
    bundle = Bundle(runs_dir, run_id)
    if not bundle.exists():
        return []
    try:
        snapshot = bundle.snapshot()
        state = bundle.raw_state()
    except (BundleCorrupt, ValueError, OSError):
        return []
    results = state.get("results") or {}
    current, status = state.get("currentNode"), state.get("status")
    found: list[dict[str, Any]] = []
    for node in snapshot.get("nodes") or []:
        node_id = node.get("id") if isinstance(node, dict) else None
        if not isinstance(node_id, str):
            continue
        entry: dict[str, Any] = {"id": node_id, "state": "pending"}
        result = results.get(node_id)
        if node_id == state.get("waitingNode") and status == RunStatus.WAITING:
            entry["state"] = "waiting"
        elif node_id == current and status == RunStatus.RUNNING and result is None:
            entry.update(state="running", since=state.get("updatedAt"))
            update = running_update(bundle, state.get("currentAttempt"))
            if update is not None:  # its latest progress (author-chosen, bounded, redacted)
                entry["update"] = update
        elif isinstance(result, dict):
            entry["state"] = "done" if result.get("outcome") == "ok" else "failed"
        elif node_id == current and status in (RunStatus.FAILED, RunStatus.TIMED_OUT):
            entry["state"] = "failed"
        found.append(entry)
    return found


def chain(store: Store, row: QueueRow) -> list[QueueRow]:
    """The run's chain, root first: its parents up to the first run, then its continuations."""
    members = [row]
    while members[0].parent_run_id is not None and len(members) < MAX_CHAIN:
        parent = store.get(members[0].parent_run_id)
        if parent is None:
            break
        members.insert(0, parent)
    while len(members) < MAX_CHAIN:
        child = store.continuation_of(members[-1].run_id)
        if child is None:
            break
        members.append(child)
    return members


def shown_state(info: dict[str, Any]) -> str:
    """The one word ``status`` and ``list`` print: ``answered`` once a continuation exists."""
    if info.get("continuedBy"):
        return "answered"
    return display_state(info["queueState"], info["runStatus"],
                         PAUSED_CODE if info.get("paused") else None)


def took_text(info: dict[str, Any], now_ms: int) -> str:
    """How long the run took, or has been running; empty before it started."""
    started, finished = info.get("startedAt"), info.get("finishedAt")
    if started is not None and finished is not None:
        return f"took {duration(finished - started)}"
    if started is not None and info["queueState"] in CLAIMED:
        return f"running for {duration(now_ms - started)}"
    return ""


def _times(info: dict[str, Any], now_ms: int) -> str:
    took = took_text(info, now_ms)
    return ago(info["createdAt"], now_ms) + (f", {took}" if took else "")


def where_text(info: dict[str, Any], *, arrow: bool = True) -> str:
    """Where the run is: ``-> CONTINUATION``, ``at NODE`` (waiting, running, parked), or empty."""
    if info.get("continuedBy"):
        return f"-> {info['continuedBy']}" if arrow else ""
    if info.get("waitingOn"):
        return f"at {info['waitingOn']}{mount_note(info['waitingOn'])}"
    if info.get("currentNode") and (info["queueState"] in CLAIMED
                                    or info["queueState"] == QueueState.PARKED):
        return (f"at {info['currentNode']}{mount_note(info['currentNode'])}"
                f"{detail_suffix(info.get('statusDetail'))}")
    return ""


def error_text(info: dict[str, Any]) -> str:
    """``[code] message`` of a run that has an error, else empty."""
    if not info.get("errorCode"):
        return ""
    return f"[{info['errorCode']}] {info['error'] or ''}".rstrip()


def status_line(info: dict[str, Any], now_ms: int | None = None, *, arrow: bool = True) -> str:
    """One human line per run; with ``now_ms``, when it started and how long it took.

    An answered run reads ``answered -> CONTINUATION`` (``arrow=False``: just
    ``answered``, for a listing that shows the continuation next).
    """
    where = where_text(info, arrow=arrow)
    err = error_text(info)
    when = "" if now_ms is None else f"  ({_times(info, now_ms)})"
    return (with_title(f"{info['runId']}  {info['workflow']}", info) + f"  {shown_state(info)}"
            f"{' ' + where if where else ''}{' ' + err if err else ''}{fork_links(info)}{when}")


def fork_links(info: dict[str, Any]) -> str:
    """`` (fork of RUN from NODE)`` and `` (forked as FORK, ...)``, each with a leading space."""
    text = ""
    if info.get("forkedFrom"):
        text += f" (fork of {info['forkedFrom']} from {info.get('forkNode')})"
    if info.get("forks"):
        text += f" (forked as {', '.join(info['forks'])})"
    return text


def chain_lines(info: dict[str, Any]) -> list[str]:
    """The chain under a run's status line: each member and its state, root first."""
    members = info.get("chain") or []
    if len(members) < 2:
        return []
    lines = [f"  chain of {len(members)} runs (one logical run):"]
    for number, member in enumerate(members, 1):
        mark = "  <- this run" if member["runId"] == info["runId"] else ""
        lines.append(f"    {number}. {member['runId']}  {member['state']}{mark}")
    return lines


def status_with_chain(store: Store, row: QueueRow, runs_dir: Path) -> dict[str, Any]:
    """``status RUN``'s object: the run, the continuation that answered it, and its chain."""
    rows = chain(store, row)
    forks = store.forks_of([member.run_id for member in rows])
    members = [run_status(member, runs_dir, forks.get(member.run_id)) for member in rows]
    for info, after in itertools.pairwise(members):
        info["continuedBy"] = after["runId"]
    members[-1]["continuedBy"] = None
    this = next(info for info in members if info["runId"] == row.run_id)
    this["chain"] = [{"runId": m["runId"], "workflow": m["workflow"],
                      "queueState": m["queueState"], "runStatus": m["runStatus"],
                      "state": shown_state(m)} for m in members]
    return this


def failure_lines(runs_dir: Path, run_id: str) -> list[str]:
    """``status RUN --debug``: where the run's last failed step raised, from its bundle."""
    # Imported here: the step logs need dataclasses, which `status --json` never loads.
    from .steplogs import last_failure, traceback_lines

    bundle = Bundle(runs_dir, run_id)
    try:
        step = last_failure(bundle) if bundle.exists() else None
    except (BundleCorrupt, OSError):
        return []
    if step is None:
        return []
    return [f"{step.node_id} (step {step.step}, attempt {step.attempt_id}) raised:",
            *traceback_lines(step.traceback)]
