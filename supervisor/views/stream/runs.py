"""The run list document: what a viewer's first screen shows, one entry per run.

Owns ``ListQuery`` (state, workflow, text, limit), ``list_doc`` (newest
first, chains grouped, each run cut down to what a list shows), and the
files whose change can change that list (``watched_paths``). Reads the
store and the bundles through ``supervisor.views`` (``listing``, ``status``,
``progress``); never writes. Imports ``protocol`` and ``supervisor.views``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ....protocol.bundle import Bundle
from ....protocol.clock import now_ms
from ....protocol.states import CLAIMED, RunStatus
from ....protocol.store import Store
from ..listing import check_state, grouped, select
from ..progress import node_update
from ..status import shown_state

DEFAULT_LIMIT = 200
MAX_LIMIT = 5000
MAX_TEXT = 200


@dataclass(frozen=True)
class ListQuery:
    state: str | None = None
    workflow: str | None = None
    text: str | None = None
    limit: int = DEFAULT_LIMIT

    def checked(self) -> ListQuery:
        """The query, or a ``UsageError`` naming what is wrong with it."""
        from ....protocol.errors import UsageError
        check_state(self.state)
        if not 1 <= self.limit <= MAX_LIMIT:
            raise UsageError(f"limit must be 1 to {MAX_LIMIT}", code="bad_limit")
        for name, value in (("workflow", self.workflow), ("text", self.text)):
            if value is not None and len(value) > MAX_TEXT:
                raise UsageError(f"{name} is longer than {MAX_TEXT} characters",
                                 code="bad_query")
        return self


def _elapsed(info: dict[str, Any], now: int) -> int | None:
    started, finished = info.get("startedAt"), info.get("finishedAt")
    if started is None:
        return None
    if finished is not None:
        return int(finished - started)
    return int(now - started) if info["queueState"] in CLAIMED else None


def summary(info: dict[str, Any], depth: int, runs_dir: Path, now: int) -> dict[str, Any]:
    """One run as a list shows it (never its input or outputs)."""
    owner = info.get("controller")
    progress = None
    node = info.get("currentNode")
    if info.get("runStatus") == RunStatus.RUNNING and isinstance(node, str):
        progress = node_update(Bundle(runs_dir, info["runId"]), node)
    return {
        "runId": info["runId"], "workflow": info["workflow"], "title": info.get("title"),
        "state": shown_state(info), "queueState": info["queueState"],
        "runStatus": info.get("runStatus"), "currentNode": info.get("currentNode"),
        "waitingOn": info.get("waitingOn"), "statusDetail": info.get("statusDetail"),
        "steps": info.get("steps"), "createdAt": info["createdAt"],
        "startedAt": info.get("startedAt"), "finishedAt": info.get("finishedAt"),
        "elapsedMs": _elapsed(info, now), "errorCode": info.get("errorCode"),
        "parentRunId": info.get("parentRunId"), "continuedBy": info.get("continuedBy"),
        "forkedFrom": info.get("forkedFrom"), "forks": list(info.get("forks") or []),
        "controller": None if not owner else {"controller": owner["controller"],
                                              "key": owner["key"]},
        "paused": bool(info.get("paused")), "pauseRequested": bool(info.get("pauseRequested")),
        "progress": progress, "depth": depth,
    }


def _matches(info: dict[str, Any], text: str) -> bool:
    needle = text.casefold()
    return any(needle in str(info.get(k) or "").casefold() for k in ("runId", "workflow", "title"))


def list_doc(store: Store | None, runs_dir: Path, query: ListQuery,
             now: int | None = None) -> dict[str, Any]:
    """The run list document (``docs/view-stream.md``); an empty one without a store."""
    at = now_ms() if now is None else now
    infos: list[dict[str, Any]] = []
    if store is not None:
        # A text filter reads titles from the bundles, so it selects before the limit.
        infos = select(store, runs_dir, state=query.state, workflow=query.workflow,
                       limit=None if query.text else query.limit + 1)
        if query.text:
            infos = [info for info in infos if _matches(info, query.text)]
    truncated = len(infos) > query.limit
    infos = infos[:query.limit]
    runs = [summary(info, depth, runs_dir, at) for depth, info in grouped(infos)]
    return {"kind": "runs", "at": at, "total": len(runs), "truncated": truncated,
            "query": asdict(query), "runs": runs}


def watched_paths(doc: dict[str, Any], runs_dir: Path) -> list[Path]:
    """The files whose change can change ``doc`` beyond the store: the runs directory
    (a bundle made or removed) and the projection of every run not settled yet."""
    paths = [runs_dir]
    for run in doc["runs"]:
        if run["queueState"] in CLAIMED or run["runStatus"] == RunStatus.RUNNING:
            bundle = Bundle(runs_dir, run["runId"])
            paths += [bundle.state_path, bundle.state_log_path, bundle.trace_path]
    return paths
