"""Read-only views of runs: the queue row joined with the bundle, when there is one.

Owns the ``status --json`` shape. Works before a bundle exists (a queued
launch) and never shows private input. Imports ``protocol`` only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..protocol.bundle import Bundle, BundleCorrupt
from ..protocol.states import CLAIMED, QueueState, RunStatus, display_state, seen_status
from ..protocol.store import QueueRow


def run_status(row: QueueRow, runs_dir: Path,
               forks: list[str] | None = None) -> dict[str, Any]:
    """``forks``: the runs forked from this one (``Store.forks_of``), oldest first."""
    data: dict[str, Any] = {
        "runId": row.run_id, "workflow": row.workflow, "queueState": row.state,
        "runStatus": None, "currentNode": None, "waitingOn": None, "steps": None,
        "errorCode": row.error_code, "error": row.error_message, "finalOutput": None,
        "parentRunId": row.parent_run_id, "runnerId": row.runner_id,
        "createdAt": row.created_at, "updatedAt": row.updated_at,
        "cancelRequested": row.cancel_requested,
        "forkedFrom": row.forked_from, "forkNode": row.fork_node, "forks": list(forks or []),
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
    })
    if data["errorCode"] is None and error:
        data["errorCode"], data["error"] = error.get("code"), error.get("message")
    return data


def status_line(info: dict[str, Any]) -> str:
    """One human line per run."""
    state = display_state(info["queueState"], info["runStatus"])
    where = ""
    if info.get("waitingOn"):
        where = f" waiting at {info['waitingOn']}"
    elif info.get("currentNode") and (info["queueState"] in CLAIMED
                                      or info["queueState"] == QueueState.PARKED):
        where = f" at {info['currentNode']}"
    err = (f" [{info['errorCode']}] {info['error'] or ''}".rstrip()
           if info.get("errorCode") else "")
    return f"{info['runId']}  {info['workflow']}  {state}{where}{err}{_fork_links(info)}"


def _fork_links(info: dict[str, Any]) -> str:
    text = ""
    if info.get("forkedFrom"):
        text += f" (fork of {info['forkedFrom']} from {info.get('forkNode')})"
    if info.get("forks"):
        text += f" (forked as {', '.join(info['forks'])})"
    return text
