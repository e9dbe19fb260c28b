"""Following a run's bundle as it grows: its trace, agent captures and shell output.

Owns reading the complete JSON lines appended to a bundle's files since the
last look (from remembered byte offsets, surviving a trace a resume rewrote
shorter and a torn last line), merging them in time order, and the plain
one-line wording of each trace event and captured agent event. Reading
never writes anything. Imports ``protocol``, ``views.wording`` (a command line) and
``views.progress`` (an update's words).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from ...protocol.artifacts import internalize
from ...protocol.bundle import Bundle, BundleCorrupt
from ...protocol.definitions.requests import request_in
from ...protocol.states import Outcome
from ...protocol.store import QueueRow
from .decisions import request_line
from .mounts import mount_line, mount_note
from .progress import dropped_text, update_text
from .runtext import detail_suffix, quoted
from .wording import cli


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _head(event: dict[str, Any]) -> str:
    at = time.strftime("%H:%M:%S", time.localtime(int(event.get("at", 0)) / 1000))
    return f"{at} #{event.get('seq')}"


def taken_up(event: dict[str, Any]) -> str:
    """The line of a fork's first resume boundary: a runner taking the fork up, not a
    recovery from an interruption."""
    return f"{_head(event)} fork taken up at {(event.get('payload') or {}).get('resumePoint')}"


def describe(event: dict[str, Any]) -> str:
    """One line for a person; unknown event types are shown by name only."""
    kind, node, p = event.get("type", "?"), event.get("nodeId"), event.get("payload") or {}
    head = _head(event)
    result = p.get("result") or {}
    error = p.get("error")
    if isinstance(error, dict):  # terminal events carry {code, message}
        code, message = error.get("code"), error.get("message")
    else:  # node events carry a result record
        code, message = result.get("errorCode"), result.get("error")
    if kind == "node_started":
        again = ", rerun" if p.get("rerun") else ""
        return (f"{head} {node}: started (step {p.get('step')}{again}){mount_note(node)}"
                + detail_suffix(p.get("statusDetail")))
    if kind == "node_finished":
        nxt = f" -> {p['next']}" if p.get("next") else ""
        return f"{head} {node}: done{nxt}  {_short(p.get('output'), 100)}"
    if kind == "node_failed":
        nxt = f" -> {p['next']}" if p.get("next") else ""
        outcome = result.get("outcome", Outcome.FAILED)
        return f"{head} {node}: {outcome} [{code}] {_short(message or '')}{nxt}"
    if kind == "agent_prompt_sent":
        where = "the session's conversation" if p.get("via") == "session" else "the agent"
        return f"{head} {node}: prompt sent to {where} ({p.get('chars')} characters)"
    if kind == "effect_recorded":
        return f"{head} {node}: effect {p.get('effect')} ({p.get('effectKey')})"
    if kind == "update_published":
        return f"{head} {node}: {_short(update_text(p))}"
    if kind == "updates_dropped":
        return f"{head} {node}: {dropped_text(p)}"
    if kind == "agent_output_replaced":
        return f"{head} {node}: submission accepted as the value {p.get('by') or 'validate'}" \
            " returned (Replace)"
    if kind == "run_waiting":
        summary = (p.get("output") or {}).get("summary")
        asks = request_line(request_in(p.get("output")))  # a human decision's question
        where = f"{p.get('waitingNode')}{mount_note(p.get('waitingNode'))}"
        return f"{head} waiting at {where}" + (f": {summary}" if summary else "") \
            + (f"; {asks}" if asks else "")
    if kind == "run_completed":
        return f"{head} completed: {_short(p.get('finalOutput'))}"
    if kind in ("run_failed", "run_timed_out", "run_cancelled"):
        return f"{head} {kind[4:].replace('_', ' ')} [{code}] {_short(message or '')}"
    if kind == "run_started" and p.get("title"):
        return describe({**event, "payload": {**p, "title": None}}) + "  " + quoted(p["title"])
    if kind == "run_started" and p.get("forkedFrom"):
        carried = ", ".join(p.get("carriedNodes") or []) or "nothing"
        return (f"{head} run_started: fork of {p['forkedFrom']} at {p.get('forkNode')},"
                f" carried from it: {carried}")
    if kind == "run_started" and p.get("parentRunId"):
        return f"{head} run_started: continues {p['parentRunId']} at {p.get('startAt')}"
    if kind == "run_paused":
        return f"{head} paused before {p.get('at')} (`pi-workflows resume` continues it)"
    if kind == "run_resumed" and p.get("boundary"):
        return f"{head} resumed at {p.get('resumePoint')}"
    if (mounted := mount_line(event)) is not None:
        return f"{head} {mounted}"
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


class JsonTail:
    """Complete JSON lines appended to one file since the last call.

    Only complete lines are taken: a torn last line is read again, whole, next
    time. A file replaced (another inode) or cut shorter than what was read is
    read again from its start, and ``restarted`` says so until the caller clears
    it (a reader that keeps what it read drops it then).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.inode: int | None = None
        self.restarted = False

    def records(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as fh:
                st = os.fstat(fh.fileno())
                if self.inode is not None and (st.st_ino != self.inode
                                               or st.st_size < self.offset):
                    # Rewritten (a resume cut a torn tail) or replaced: read it again.
                    self.offset, self.restarted = 0, True
                self.inode = st.st_ino
                fh.seek(self.offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        end = chunk.rfind(b"\n") + 1  # the torn rest waits for its newline
        self.offset += end
        out = []
        for line in chunk[:end].split(b"\n")[:-1]:
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a damaged line, repaired by the next resume
            if isinstance(record, dict):
                out.append(record)
        return out


# What a follower yields: ("trace", event), ("agent", capture record) or
# ("output", a chunk of a shell step's output from ``output.ndjson``).
Item = tuple[str, dict[str, Any]]


def plain_line(item: Item) -> str | None:
    """The plain line of one item; shell output has none (plain output stays as it was)."""
    kind, record = item
    if kind == "trace":
        return describe(record)
    if kind == "agent":
        return describe_capture(record)
    return None


class TraceFollower:
    """A run as it happens: its trace, its agents' captured text and tool calls, and
    its shell steps' output while they run."""

    def __init__(self, bundle: Bundle) -> None:
        self.bundle = bundle
        self._trace = JsonTail(bundle.trace_path)
        self._capture = JsonTail(bundle.session_dir / "events.ndjson")
        self._output = JsonTail(bundle.output_path)
        self._seq = 0

    def items(self) -> list[Item]:
        """Everything written since the last call, in time order (the trace first on a tie)."""
        found: list[tuple[int, int, Item]] = []
        for event in self._trace.records():
            seq = event.get("seq")
            if isinstance(seq, int):
                if seq <= self._seq:
                    continue  # seen before the trace was rewritten
                self._seq = seq
            if event.get("type") == "run_waiting":
                event = self._resolved(event)
            found.append((int(event.get("at", 0)), 0, ("trace", event)))
        for order, (kind, tail) in enumerate((("agent", self._capture),
                                              ("output", self._output)), start=1):
            found.extend((int(r.get("at", 0)), order, (kind, r)) for r in tail.records())
        return [item for _, _, item in sorted(found, key=lambda f: (f[0], f[1]))]

    def lines(self) -> list[str]:
        return [line for line in map(plain_line, self.items()) if line is not None]

    def _resolved(self, event: dict[str, Any]) -> dict[str, Any]:
        """A waiting event with its long strings (a long question) read back from artifacts."""
        payload = event.get("payload")
        if not isinstance(payload, dict) or "output" not in payload:
            return event
        try:
            output = internalize(payload["output"], self.bundle.artifacts.get)
        except (OSError, ValueError):
            return event  # shown as recorded; status says what is missing
        return {**event, "payload": {**payload, "output": output}}

    def status(self) -> str | None:
        if not self.bundle.exists():
            return None
        try:
            return self.bundle.raw_state().get("status")
        except BundleCorrupt:
            return None


def ended_without_bundle(row: QueueRow, project: Path | None = None) -> str:
    """Why a run the queue ended has no settled bundle to show (its error, from the queue)."""
    if row.error_code is None:
        return (f"{row.state}, but the run's bundle is missing or unreadable; see"
                f" `{cli(project, 'status', row.run_id)}`")
    return f"{row.state}: [{row.error_code}] {row.error_message or ''}".rstrip()
