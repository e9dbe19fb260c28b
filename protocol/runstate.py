"""The shape of a run's projection (``state.json``) and how a run ends in it.

Owns the ``RunState`` type every reader and writer of the projection uses,
the projection of a new run, and the one function that turns a terminal (or
waiting) event into the changes it makes, shared by the engine and by
settling a run that no worker owns. Imports ``protocol.states`` only.
"""

from __future__ import annotations

from typing import Any, TypedDict

from .states import STATUS_AFTER, RunStatus


class ErrorInfo(TypedDict):
    code: str
    message: str


class PendingEnd(TypedDict, total=False):
    type: str
    error: ErrorInfo


class RunState(TypedDict, total=False):
    """``state.json``. Readers ignore keys they do not know (the bundle adds some)."""

    runId: str
    workflow: str | None
    status: str  # a RunStatus value
    input: Any
    outputs: dict[str, Any]
    results: dict[str, dict[str, Any]]
    steps: int
    currentNode: str | None
    currentAttempt: str | None
    lastNode: str | None
    pendingEnd: PendingEnd | None
    waitingNode: str | None
    waitingOutput: dict[str, Any] | None
    finalOutput: Any
    error: ErrorInfo | None
    paused: bool
    parentRunId: str | None
    answeredNode: str | None
    answer: Any
    forkedFrom: str | None  # a fork (``pi-workflows fork``): the run and node it started from
    forkNode: str | None
    title: str | None  # resolved once at start; a continuation or fork keeps its chain's
    startedAt: str | None  # ISO 8601 UTC: when the chain's first run started (ctx.state)
    statusDetail: str | None  # the running node's status detail, while it runs
    mountSteps: dict[str, int]  # a composed graph: steps per running mount (worker/mounts.py)
    traceSeq: int
    updatedAt: int


def new_state(run_id: str, workflow: str | None, start_at: str, run_input: Any) -> RunState:
    return {
        "runId": run_id, "workflow": workflow, "status": RunStatus.RUNNING, "input": run_input,
        "outputs": {}, "results": {}, "steps": 0, "currentNode": start_at,
        "currentAttempt": None, "lastNode": None, "pendingEnd": None, "waitingNode": None,
        "waitingOutput": None, "finalOutput": None, "error": None, "paused": False,
        "parentRunId": None, "answeredNode": None,
    }


def ending(event_type: str, error: ErrorInfo | None = None,
           output: Any = None) -> tuple[RunState, dict[str, Any]]:
    """(projection changes, event payload) for a run ending with ``event_type``."""
    changes: RunState = {"status": STATUS_AFTER[event_type], "currentNode": None,
                         "currentAttempt": None, "pendingEnd": None}
    payload: dict[str, Any] = {}
    if error is not None:
        changes["error"] = error
        payload["error"] = error
    if event_type == "run_completed":
        changes["finalOutput"] = output
        payload["finalOutput"] = output
    return changes, payload
