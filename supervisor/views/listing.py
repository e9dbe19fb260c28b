"""What ``list`` shows: the filters, newest first, and chains grouped under their first run.

Owns the words ``list --state`` accepts (queue states, run statuses and
``answered``, the words the views print), selecting runs by state, workflow,
age, offset and count, and laying a listing out as a table (a header,
columns sized to a width) in which each chain (a waiting run and the
continuations that answered it) reads as one logical run. Imports
``protocol``, ``supervisor.views.status`` and ``supervisor.views.timefmt``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...protocol.errors import UsageError
from ...protocol.states import CLAIMED, PAUSED, QUEUE_STATES, RunStatus
from ...protocol.store import Store
from .runtext import quoted
from .status import error_text, fork_links, run_status, shown_state, where_text
from .timefmt import ago, duration

ANSWERED = "answered"
STATE_WORDS: tuple[str, ...] = tuple(dict.fromkeys(
    [*QUEUE_STATES, *RunStatus, PAUSED, ANSWERED]))
# Bounds of --limit and --offset: far past any listing a person reads, and
# well inside SQLite's 64-bit integers (a larger value is a usage error).
MAX_LIMIT = 1_000_000
MAX_OFFSET = 1_000_000_000


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
           until_ms: int | None = None, limit: int | None = None,
           offset: int = 0) -> list[dict[str, Any]]:
    """Status objects of the matching runs, newest first, each with ``continuedBy``.

    ``offset`` skips the newest matches (after every filter), ``limit`` bounds the rest.
    """
    continued = store.continuations()
    # A state filter needs the bundle's status, so the offset and limit apply after it.
    by_sql = state is None
    rows = store.recent_runs(workflow=workflow, since_ms=since_ms, until_ms=until_ms,
                             limit=limit if by_sql else None, offset=offset if by_sql else 0)
    skip = 0 if by_sql else offset
    infos = []
    forks = store.forks_of([row.run_id for row in rows])
    # A controller's child run is detached: one read names the controllers of them all.
    children = store.children_by_runs(row.run_id for row in rows
                                      if row.origin_session is None and row.parent_run_id is None)
    for row in rows:
        info = run_status(row, runs_dir, forks.get(row.run_id))
        info["continuedBy"] = continued.get(row.run_id)
        child = children.get(row.run_id)
        if child is not None:
            info["controller"] = {"controller": child.controller, "key": child.key,
                                  "requestKey": child.request_key, "attempt": child.attempt}
        if state is not None and state not in _words(info):
            continue
        if skip:
            skip -= 1
            continue
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


HEADER = ("RUN", "WORKFLOW", "STATE", "CREATED", "DURATION", "DETAIL")
FIXED_WIDTH = 120  # not a terminal: one width, so piped output does not depend on who ran it
_GAP = "  "


def _duration(info: dict[str, Any], now_ms: int) -> str:
    started, finished = info.get("startedAt"), info.get("finishedAt")
    if started is not None and finished is not None:
        return duration(finished - started)
    if started is not None and info["queueState"] in CLAIMED:
        return f"{duration(now_ms - started)} so far"
    return "-"


def _row(depth: int, info: dict[str, Any], shown: set[str], now_ms: int) -> tuple[str, ...]:
    run = ("  " * depth + "-> " if depth else "") + info["runId"]
    # The continuation's own row follows, so the parent's need not name it.
    detail = [quoted(info.get("title")),
              where_text(info, arrow=info.get("continuedBy") not in shown), error_text(info),
              fork_links(info).strip()]
    if not depth and info.get("parentRunId"):
        detail.append(f"(continues {info['parentRunId']})")
    if info.get("controller"):
        owner = info["controller"]
        detail.append(f"(controller {owner['controller']}/{owner['key']})")
    return (run, str(info["workflow"]), shown_state(info), ago(info["createdAt"], now_ms),
            _duration(info, now_ms), " ".join(part for part in detail if part))


def listing_lines(infos: list[dict[str, Any]], now_ms: int,
                  width: int = FIXED_WIDTH) -> list[str]:
    """The human listing: a header, then a row per run, continuations indented under
    their parent; the columns sized to their contents, the last cut to ``width``."""
    shown = {info["runId"] for info in infos}
    rows = [HEADER, *(_row(depth, info, shown, now_ms) for depth, info in grouped(infos))]
    sizes = [max(len(row[col]) for row in rows) for col in range(len(HEADER) - 1)]
    lines = []
    for row in rows:
        head = _GAP.join(cell.ljust(size) for cell, size in zip(row, sizes, strict=False))
        detail = row[-1]
        # Cut only the free text, never to a stub; ids and states stay whole past the width.
        room = max(width - len(head) - len(_GAP), 20)
        if len(detail) > room:
            detail = detail[:room - 1] + "…"
        lines.append((head + _GAP + detail).rstrip())
    return lines


def empty_line(filters: list[str]) -> str:
    """What ``list`` says when no run matches: the filters given, as typed."""
    if not filters:
        return "no runs in this project yet (`pi-workflows run NAME` starts one)"
    return f"no runs match ({', '.join(filters)})"
