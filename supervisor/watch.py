"""A live, read-only view of one run: its trace as it grows, until it settles.

Owns formatting trace events for a terminal and following a run's bundle
from a remembered byte offset. Watching never writes anything: closing the
view changes nothing about the run. Imports ``protocol`` only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..protocol.bundle import Bundle, BundleCorrupt
from ..protocol.errors import ExitCode
from ..protocol.states import (
    SETTLED_STATUSES,
    TERMINAL,
    UNOWNED,
    Outcome,
    exit_code,
    seen_status,
)
from ..protocol.store import QueueRow, Store


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe(event: dict[str, Any]) -> str:
    """One line for a person; unknown event types are shown by name only."""
    kind, node, p = event.get("type", "?"), event.get("nodeId"), event.get("payload") or {}
    at = time.strftime("%H:%M:%S", time.localtime(int(event.get("at", 0)) / 1000))
    head = f"{at} #{event.get('seq')}"
    result = p.get("result") or {}
    error = p.get("error")
    if isinstance(error, dict):  # terminal events carry {code, message}
        code, message = error.get("code"), error.get("message")
    else:  # node events carry a result record
        code, message = result.get("errorCode"), result.get("error")
    if kind == "node_started":
        again = ", rerun" if p.get("rerun") else ""
        return f"{head} {node}: started (step {p.get('step')}{again})"
    if kind == "node_finished":
        nxt = f" -> {p['next']}" if p.get("next") else ""
        return f"{head} {node}: done{nxt}  {_short(p.get('output'), 100)}"
    if kind == "node_failed":
        nxt = f" -> {p['next']}" if p.get("next") else ""
        outcome = result.get("outcome", Outcome.FAILED)
        return f"{head} {node}: {outcome} [{code}] {_short(message or '')}{nxt}"
    if kind == "agent_prompt_sent":
        return f"{head} {node}: prompt sent to the agent ({p.get('chars')} characters)"
    if kind == "effect_recorded":
        return f"{head} {node}: effect {p.get('effect')} ({p.get('effectKey')})"
    if kind == "update_published":
        return f"{head} {node}: {_short(p.get('message', ''))}"
    if kind == "run_waiting":
        summary = (p.get("output") or {}).get("summary")
        return f"{head} waiting at {p.get('waitingNode')}" + (f": {summary}" if summary else "")
    if kind == "run_completed":
        return f"{head} completed: {_short(p.get('finalOutput'))}"
    if kind in ("run_failed", "run_timed_out", "run_cancelled"):
        return f"{head} {kind[4:].replace('_', ' ')} [{code}] {_short(message or '')}"
    if kind == "run_resumed" and p.get("boundary"):
        return f"{head} resumed at {p.get('resumePoint')}"
    return f"{head} {kind}" + (f" {node}" if node else "")


def describe_capture(record: dict[str, Any]) -> str | None:
    """One line for a captured agent event (``session/events.ndjson``), or None to skip."""
    at = time.strftime("%H:%M:%S", time.localtime(int(record.get("at", 0)) / 1000))
    node, kind = record.get("nodeId"), record.get("kind")
    if kind == "text":
        return f"{at}   {node}> {_short(record.get('text', ''), 300)}"
    if kind == "tool_start":
        return f"{at}   {node}> tool {record.get('tool')} {_short(record.get('args', ''), 120)}"
    if kind == "tool_end" and record.get("isError"):
        return f"{at}   {node}> tool {record.get('tool')} failed: {_short(record.get('result'))}"
    return None


class _Tail:
    """Complete JSON lines appended to one file since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.pending = b""

    def records(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        self.offset += len(chunk)
        *complete, self.pending = (self.pending + chunk).split(b"\n")
        out = []
        for line in complete:
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a torn line, repaired by the next resume
            if isinstance(record, dict):
                out.append(record)
        return out


class TraceFollower:
    """A run as it happens: its trace, and its agents' captured text and tool calls."""

    def __init__(self, bundle: Bundle) -> None:
        self.bundle = bundle
        self._trace = _Tail(bundle.trace_path)
        self._capture = _Tail(bundle.session_dir / "events.ndjson")

    def lines(self) -> list[str]:
        items = [(int(e.get("at", 0)), 0, describe(e)) for e in self._trace.records()]
        for record in self._capture.records():
            line = describe_capture(record)
            if line is not None:
                items.append((int(record.get("at", 0)), 1, line))
        return [line for _, _, line in sorted(items, key=lambda item: (item[0], item[1]))]

    def status(self) -> str | None:
        if not self.bundle.exists():
            return None
        try:
            return self.bundle.raw_state().get("status")
        except BundleCorrupt:
            return None


def ended_without_bundle(row: QueueRow) -> str:
    """Why a run the queue ended has no settled bundle to show (its error, from the queue)."""
    if row.error_code is None:
        return (f"{row.state}, but the run's bundle is missing or unreadable; see"
                f" `pi-workflows status {row.run_id}`")
    return f"{row.state}: [{row.error_code}] {row.error_message or ''}".rstrip()


def watch(store: Store, runs_dir: Path, run_id: str, *, echo: Callable[[str], None],
          poll_s: float = 0.2) -> int:
    """Print the run's events as they are written; return the exit code for how it ended."""
    follower = TraceFollower(Bundle(runs_dir, run_id))
    said: str | None = None
    while True:
        for line in follower.lines():
            echo(line)
        row = store.get(run_id)
        if row is None:
            echo(f"run {run_id} is gone from the queue")
            return ExitCode.USAGE
        status = follower.status()
        if row.state in TERMINAL:
            if status not in SETTLED_STATUSES:
                echo(ended_without_bundle(row))
            seen = seen_status(row.state, status, row.cancel_requested)
            if seen != status:
                echo("cancelled while it waited")
            code = exit_code(row.state, seen)
            return ExitCode.RUN_FAILED if code is None else code
        if row.state in UNOWNED and said != row.state:
            reason = f" [{row.error_code}] {row.error_message}" if row.error_code else ""
            echo(f"{row.state}{reason}; waiting for a runner (is `pi-workflows host` running?)")
        said = row.state
        time.sleep(poll_s)
