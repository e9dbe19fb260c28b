"""What ``list`` shows: the filters, newest first, and chains grouped under their first run.

Owns the words ``list --state`` accepts (queue states, run statuses and
``answered``, the words the views print), selecting runs by state, workflow,
age and count, and ordering a listing so that each chain (a waiting run and
the continuations that answered it) reads as one logical run. Imports
``protocol`` and ``supervisor.views.status``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...protocol.errors import UsageError
from ...protocol.states import QUEUE_STATES, RunStatus
from ...protocol.store import Store
from .status import run_status, shown_state, status_line

ANSWERED = "answered"
STATE_WORDS: tuple[str, ...] = tuple(dict.fromkeys(
    [*QUEUE_STATES, *RunStatus, ANSWERED]))


def check_state(word: str | None) -> str | None:
    """A word ``list --state`` accepts: one of ``STATE_WORDS``, or ``QUEUE/STATUS`` as shown."""
    if word is None or word in STATE_WORDS:
        return word
    queue, _, status = word.partition("/")
    if queue in QUEUE_STATES and status in tuple(RunStatus):
        return word  # a display state such as parked/running
    raise UsageError(f"unknown state {word!r} for --state; use one of {', '.join(STATE_WORDS)}"
                     " (or QUEUE/STATUS as shown, such as parked/running)", code="unknown_state")


def _words(info: dict[str, Any]) -> set[str]:
    """Every state word a run answers to: its queue state, its status, what is shown."""
    shown = shown_state(info)
    words = {str(info["queueState"]), shown}
    if info["runStatus"] is not None and shown != ANSWERED:
        words.add(str(info["runStatus"]))  # an answered run no longer waits
    return words


def select(store: Store, runs_dir: Path, *, state: str | None = None,
           workflow: str | None = None, since_ms: int | None = None,
           limit: int | None = None) -> list[dict[str, Any]]:
    """Status objects of the matching runs, newest first, each with ``continuedBy``."""
    continued = store.continuations()
    # A state filter needs the bundle's status, so the limit applies after it.
    rows = store.recent_runs(workflow=workflow, since_ms=since_ms,
                             limit=limit if state is None else None)
    infos = []
    forks = store.forks_of([row.run_id for row in rows])
    for row in rows:
        info = run_status(row, runs_dir, forks.get(row.run_id))
        info["continuedBy"] = continued.get(row.run_id)
        if state is None or state in _words(info):
            infos.append(info)
        if limit is not None and len(infos) >= limit:
            break
    return infos


def grouped(infos: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """(depth, run) in listing order: chains by their newest run, each root first.

    A continuation is shown indented under its parent when the parent is
    shown too; otherwise it stands alone (its line says what it continues).
    """
    by_id = {info["runId"]: info for info in infos}
    children: dict[str, list[dict[str, Any]]] = {}
    for info in infos:
        if info.get("parentRunId") in by_id:
            children.setdefault(info["parentRunId"], []).append(info)
    roots: dict[str, dict[str, Any]] = {}  # insertion order: newest member first
    for info in infos:
        root = info
        for _ in range(len(infos)):  # bounded: a damaged store could hold a cycle
            if root.get("parentRunId") not in by_id:
                break
            root = by_id[root["parentRunId"]]
        roots.setdefault(root["runId"], root)
    out: list[tuple[int, dict[str, Any]]] = []
    placed: set[str] = set()

    def walk(info: dict[str, Any], depth: int) -> None:
        if info["runId"] in placed:
            return
        placed.add(info["runId"])
        out.append((depth, info))
        for child in sorted(children.get(info["runId"], []),
                            key=lambda c: (c["createdAt"], c["runId"])):
            walk(child, depth + 1)

    for root in roots.values():
        walk(root, 0)
    return out


def listing_lines(infos: list[dict[str, Any]], now_ms: int) -> list[str]:
    """The human listing: one line per run, continuations indented under their parent."""
    shown = {info["runId"] for info in infos}
    lines = []
    for depth, info in grouped(infos):
        # The continuation's own line follows, so the parent's need not name it.
        line = status_line(info, now_ms, arrow=info.get("continuedBy") not in shown)
        if depth:
            line = "  " * depth + "-> " + line
        elif info.get("parentRunId"):
            line += f"  (continues {info['parentRunId']})"
        lines.append(line)
    return lines
