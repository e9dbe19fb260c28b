"""What the terminal viewer says about runs, as plain text: rows, steps, the inspector.

Owns the wording of the view stream's documents for people: a run list
row's cells (id, workflow and title, state, elapsed, progress), a step's
cells, a step's inspector (its output as pretty JSON, shell stdout and
stderr, the agent conversation, its error) and the one-snapshot text of
``view --once`` (the list, or a run with its graph). The Textual app and
the plain path share these, so both say the same. Imports ``views``
(time and progress wording) and ``tui.graphview``; never textual, so
``view --once`` stays fast and works without the ui extra.
"""

from __future__ import annotations

import json
from typing import Any

from ..views.progress import update_text
from ..views.timefmt import duration
from .graphview import graph_text

LIST_COLUMNS = ("RUN", "WORKFLOW", "STATE", "ELAPSED", "PROGRESS")
STEP_COLUMNS = ("#", "NODE", "KIND", "OUTCOME", "TIME")
MAX_INSPECT_LINES = 400  # of one record kind in the inspector: the rest is in `logs`


def run_title(run: dict[str, Any]) -> str:
    workflow = str(run.get("workflow") or "?")
    title = run.get("title")
    return f"{workflow}: {title}" if title else workflow


def elapsed_text(run: dict[str, Any]) -> str:
    ms = run.get("elapsedMs")
    return "" if ms is None else duration(ms)


def progress_cell(run: dict[str, Any]) -> str:
    progress = run.get("progress")
    if progress:
        return update_text(progress)
    detail = run.get("statusDetail")
    return str(detail) if detail else ""


def run_cells(run: dict[str, Any]) -> tuple[str, ...]:
    """One run list row; a continuation is indented under the first run of its chain."""
    indent = "  └ " * min(int(run.get("depth") or 0), 1)
    return (indent + str(run.get("runId")), run_title(run), str(run.get("state") or "?"),
            elapsed_text(run), progress_cell(run))


def step_cells(index: int, step: dict[str, Any]) -> tuple[str, ...]:
    ms = step.get("durationMs")
    return (str(index + 1), str(step.get("nodeId")), str(step.get("kind") or ""),
            str(step.get("outcome") or ""), "" if ms is None else duration(ms))


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]], width: int) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        line = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        lines.append(line if len(line) <= width else line[:width - 1] + "…")
    return lines


def list_text(doc: dict[str, Any], width: int = 100) -> str:
    """A run list document as a table, newest first; a line when nothing matches."""
    runs = doc.get("runs") or []
    if not runs:
        query = doc.get("query") or {}
        given = [f"{k} {v}" for k, v in query.items() if v is not None and k != "limit"]
        return "no runs" + (f" match ({', '.join(given)})" if given else " yet")
    lines = _table(LIST_COLUMNS, [run_cells(r) for r in runs], width)
    if doc.get("truncated"):
        lines.append(f"(showing {len(runs)} of {doc.get('total')} runs)")
    return "\n".join(lines)


def pretty(value: Any) -> str:
    """A step's output (or any JSON value) as indented JSON; a large value's reference as such."""
    if isinstance(value, dict) and value.get("$ref") == "artifact":
        return (f"(a large value, {value.get('bytes')} bytes; it starts with)\n"
                f"{value.get('preview', '')}")
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def _record_lines(records: list[dict[str, Any]], attempt: Any) -> list[str]:
    mine = [r for r in records if r.get("attemptId") == attempt]
    lines = (_conversation_line(r) for r in mine[-MAX_INSPECT_LINES:])
    return [line for line in lines if line is not None]


def _short(value: Any, size: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True,
                                                            ensure_ascii=False)
    return text if len(text) <= size else text[:size - 1] + "…"


# What each kind of captured agent event reads as; a kind not listed is not shown.
_TALK: dict[str, Any] = {
    "text": lambda r: f"agent: {r.get('text', '')}",
    "tool_start": lambda r: f"→ {r.get('tool')} {_short(r.get('args', ''), 200)}",
    "tool_end": lambda r: (f"← {r.get('tool')} " + ("failed: " if r.get("isError") else "")
                           + _short(r.get("result", ""), 200)),
}


def _conversation_line(record: dict[str, Any]) -> str | None:
    """One captured agent event (``text``, ``tool_start``, ``tool_end``) as a line."""
    say = _TALK.get(str(record.get("kind")))
    return None if say is None else str(say(record))


def _stream_text(doc: dict[str, Any], step: dict[str, Any], stream: str) -> str:
    recorded = step.get(stream)
    if isinstance(recorded, str) and recorded:
        return recorded
    live = [r for r in doc.get("output") or []
            if r.get("attemptId") == step.get("attemptId") and r.get("stream") == stream]
    return "".join(str(r.get("text") or "") for r in live[-MAX_INSPECT_LINES:])


def inspector_text(doc: dict[str, Any], step: dict[str, Any] | None) -> str:
    """Everything about one step: what it was, its output, shell streams, agent talk, error."""
    if step is None:
        return "(no step selected)"
    ms = step.get("durationMs")
    parts = [f"{step.get('nodeId')} · {step.get('kind') or '?'} · {step.get('outcome') or '?'}"
             + ("" if ms is None else f" · {duration(ms)}")]
    if step.get("statusDetail"):
        parts.append(str(step["statusDetail"]))
    if step.get("error") or step.get("errorCode"):
        parts.append(f"error ({step.get('errorCode') or 'error'}): {step.get('error') or ''}")
    if step.get("exitCode") is not None:
        parts.append(f"exit code {step['exitCode']}")
    if step.get("output") is not None:
        parts.append("output:\n" + pretty(step["output"]))
    for stream in ("stdout", "stderr"):
        text = _stream_text(doc, step, stream)
        if text:
            parts.append(f"{stream}:\n{text.rstrip()}")
    talk = _record_lines(doc.get("conversation") or [], step.get("attemptId"))
    if talk:
        parts.append("conversation:\n" + "\n".join(talk))
    updates = step.get("updates") or []
    if updates:
        parts.append("updates:\n" + "\n".join(update_text(u) for u in updates[-20:]))
    return "\n\n".join(parts)


def run_text(doc: dict[str, Any], width: int = 100) -> str:
    """A run document as text: its header, the graph with node states, the steps, the error."""
    run = doc.get("run") or {}
    head = [f"{doc.get('runId')}  {run_title(run)}  {run.get('state') or '?'}"
            + (f"  {elapsed_text(run)}" if run.get("elapsedMs") is not None else "")]
    chain = doc.get("chain") or []
    if len(chain) > 1:
        head.append("chain: " + " -> ".join(f"{c.get('runId')} ({c.get('state')})"
                                            for c in chain))
    if doc.get("bundle") not in (None, "ok"):
        head.append(f"bundle: {doc.get('bundle')}")
    if run.get("error"):
        head.append(f"error: {pretty(run['error'])}")
    graph = graph_text(doc.get("graph"), doc.get("nodes") or {}, width=width)
    steps = doc.get("steps") or []
    step_lines = (_table(STEP_COLUMNS, [step_cells(i, s) for i, s in enumerate(steps)], width)
                  if steps else ["(no steps yet)"])
    return "\n".join([*head, "", graph, "", *step_lines])
