"""The live view of one run on a terminal (rich), for ``run``, ``watch`` and ``activate``.

Owns turning the follower's items (trace events, agent capture, shell output
as it is produced) into a redrawn region at the bottom of the terminal: the
workflow's nodes with their states, the current node with its elapsed time
ticking, the last lines of its output or agent text; above it, lines worth
keeping (failures, agent updates, messages, interruptions) in plain words;
the current node's progress as a bar with the time left (``views.progress``);
and at the end the outcome for a person with the exact next command. Only
``supervisor.views.runview`` imports this module, and only on a terminal, so rich
never slows the CLI's start-up. A terminal that goes away (EIO) stops the
drawing and nothing else. Imports rich, ``protocol`` and the views' follower
and wording; never another wing.
"""

from __future__ import annotations

import re
import time
from collections import deque
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ...protocol.bundle import BundleCorrupt
from ...protocol.clock import now_ms
from ...protocol.definitions.requests import request_in
from ...protocol.states import SETTLED_STATUSES, Outcome, RunStatus, seen_status
from ...protocol.store import QueueRow
from ...protocol.updates import progress_of, update_data
from .decisions import answer_steps, request_lines
from .follower import Item, TraceFollower
from .mounts import MOUNT_EVENTS, mount_line, mount_note
from .nextcmd import fork_default, next_steps
from .progress import ProgressTrack, dropped_text, update_text
from .runtext import quoted
from .wording import (
    cli,
    duration_text,
    effect_note,
    error_text,
    notify_message,
    outcome_word,
    person_text,
    shell_output,
)

TAIL_LINES = 12
FAILED_LINES = 5  # of a failed command's output, kept above the view
REFRESH_S = 0.1
LINE_CHARS = 400  # one tail line, at most (a minified file is one long line)
# How a node is shown: display words, not states (``outcome_word`` gives the ended ones).
PENDING, RUNNING, SKIPPED, INTERRUPTED = "pending", "running", "skipped", "interrupted"
CARRIED = "carried"  # done in the run a fork or continuation started from
MARKS = {PENDING: ("·", "dim"), RUNNING: ("●", "yellow"), "done": ("✓", "green"),
         "failed": ("✗", "red"), "timed out": ("✗", "red"), "stopped": ("■", "magenta"),
         SKIPPED: ("–", "dim"), "waiting": ("?", "cyan"), INTERRUPTED: ("‖", "yellow"),
         CARRIED: ("↪", "dim")}
# Escape sequences and control characters a command may print (colours, progress bars).
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")
_END_EVENTS = {"run_completed": RunStatus.COMPLETED, "run_failed": RunStatus.FAILED,
               "run_timed_out": RunStatus.TIMED_OUT, "run_cancelled": RunStatus.CANCELLED,
               "run_waiting": RunStatus.WAITING}


def _clean(line: str) -> str:
    """A line as a terminal would leave it: after its last carriage return, no escapes."""
    return _CONTROL.sub("", line.rstrip("\r").rsplit("\r", 1)[-1])[:LINE_CHARS]


@dataclass
class _Node:
    id: str
    kind: str
    state: str = PENDING
    started: int | None = None
    ended: int | None = None
    detail: str | None = None  # its status detail, shown while it runs


class LiveView:
    def __init__(self, *, project: Path | None = None, console: Console | None = None,
                 clock: Any = now_ms) -> None:
        self.console = console or Console(highlight=False)
        self.project = project
        self.clock = clock
        self.live: Live | None = None
        self.dead = False
        self.run_id: str | None = None
        self.workflow: str | None = None
        self.title: str | None = None
        self.nodes: dict[str, _Node] = {}
        self.current: str | None = None
        self.attempt: str | None = None
        self.tail: deque[Text] = deque(maxlen=TAIL_LINES)
        self.partial: dict[str, str] = {}
        self.status: str | None = None
        self.started: int | None = None
        self.failed_node: str | None = None
        self.told: set[str] = set()  # notify messages already printed
        self.fork_start = False  # the next resume boundary is a fork starting, not a recovery
        self.answered = False  # its wait already has a continuation
        self.paused = False  # the last thing the run did was `run_paused`
        self.progress: ProgressTrack | None = None  # the current attempt's, once it has one
        self._drawn = 0.0

    # ---- the RunView protocol -----------------------------------------

    def say(self, line: str) -> None:
        self._print(Text(line))

    def show(self, follower: TraceFollower) -> None:
        if self.dead:
            return
        if self.run_id is None:
            self.run_id = follower.bundle.run_id
        if not self.nodes:
            self._load_nodes(follower)
        for item in follower.items():
            self._take(item)
        self._draw()

    def end(self, follower: TraceFollower, row: QueueRow | None, *,
            answered: bool = False) -> None:
        self.answered = answered
        self.show(follower)
        status = follower.status()
        if row is not None:  # a wait closed by `cancel` reads cancelled
            status = seen_status(row.state, status, row.cancel_requested)
        if status in SETTLED_STATUSES:
            self.status = status
            for node in self.nodes.values():
                if node.state == PENDING and status != RunStatus.WAITING:
                    node.state = SKIPPED  # a waiting run may still get there
        else:
            for node in self.nodes.values():
                if node.state == RUNNING:
                    node.state = INTERRUPTED
        self.current = None
        self.tail.clear()
        self._draw(force=True)
        self._stop()
        if status in SETTLED_STATUSES:
            self._summary(follower, status)

    def close(self) -> None:
        self._stop()

    # ---- reading the run ----------------------------------------------

    def _load_nodes(self, follower: TraceFollower) -> None:
        if not follower.bundle.workflow_path.exists():
            return
        try:
            snap = follower.bundle.snapshot()
        except BundleCorrupt:
            return
        self.workflow = str(snap.get("name") or "")
        for raw in snap.get("nodes") or []:
            if isinstance(raw, dict) and isinstance(raw.get("id"), str):
                self.nodes[raw["id"]] = _Node(raw["id"], str(raw.get("kind", "")))
        self._mark_carried(follower)

    def _mark_carried(self, follower: TraceFollower) -> None:
        """Nodes a fork or continuation took over done: a node that runs here again has
        its own events, which replace the mark."""
        try:
            state = follower.bundle.raw_state()
        except (BundleCorrupt, OSError, ValueError):
            return
        if not (state.get("forkedFrom") or state.get("parentRunId")):
            return
        for node_id in state.get("results") or {}:
            if node_id in self.nodes and self.nodes[node_id].state == PENDING:
                self.nodes[node_id].state = CARRIED

    def _node(self, node_id: str) -> _Node:
        if node_id not in self.nodes:  # not in the snapshot: show it anyway
            self.nodes[node_id] = _Node(node_id, "")
        return self.nodes[node_id]

    def _take(self, item: Item) -> None:
        kind, record = item
        if kind == "trace":
            self._event(record)
        elif record.get("attemptId") == self.attempt and self.attempt is not None:
            if kind == "output":
                self._output(record)
            else:
                self._agent(record)

    def _event(self, event: dict[str, Any]) -> None:
        kind, p = event.get("type"), event.get("payload") or {}
        node_id, at = event.get("nodeId"), int(event.get("at", 0))
        if kind == "run_started":
            self.workflow = self.workflow or p.get("workflow")
            self.title = self.title or p.get("title")
            self.started = self.started or at
            self._origin(p)
        elif kind == "node_started" and node_id:
            node = self._node(node_id)
            node.state, node.started, node.ended = RUNNING, at, None
            node.detail = p.get("statusDetail")
            self.current, self.attempt = node_id, event.get("attemptId")
            self.progress = None
            self.tail.clear()
            self.partial.clear()
        elif kind in ("node_finished", "node_failed") and node_id:
            self._finished(node_id, kind, p, at)
        elif kind == "effect_recorded" and node_id:
            note = effect_note(p.get("effect"))
            if note:
                self._print(Text(f"  {node_id}: {note}", style="yellow"))
        elif kind == "agent_prompt_sent" and node_id:
            self._print(Text(f"  {node_id}: prompt sent to the agent", style="dim"))
        elif kind == "update_published" and node_id:
            self._update(node_id, event.get("attemptId"), p, at)
        elif kind == "updates_dropped" and node_id:
            self._print(Text(f"  {node_id}: {dropped_text(p)}", style="yellow"))
        elif kind in MOUNT_EVENTS and node_id:  # an include's entry or exit: passed, no step
            self._node(node_id).state = outcome_word(Outcome.OK)
            self._print(Text(f"  {mount_line(event)}", style="cyan"))
        elif kind == "run_resumed" and p.get("boundary") and self.fork_start:
            self.fork_start = False  # a host taking up the fork: nothing was interrupted
        elif kind == "run_paused":
            self.paused = True
            self.current = None
            self._print(Text(f"  paused before {p.get('at')}: no step starts until"
                             f" `pi-workflows resume {self.run_id}`", style="yellow"))
        elif kind == "run_resumed" and p.get("boundary") and self.paused:
            self.paused = False
            self._print(Text(f"  resumed at {p.get('resumePoint')} after a pause",
                             style="yellow"))
        elif kind == "run_resumed" and p.get("boundary"):
            self._print(Text(f"  resumed at {p.get('resumePoint')} after an interruption;"
                             " steps that finished are not run again", style="yellow"))
        elif kind in _END_EVENTS:
            self.status = _END_EVENTS[str(kind)]
            if kind == "run_waiting":
                self._node(str(p.get("waitingNode"))).state = "waiting"
            self.current = None

    def _update(self, node_id: str, attempt: Any, p: dict[str, Any], at: int) -> None:
        """Progress of the step in progress goes to its bar; anything else is printed."""
        data = update_data(p)
        progress = progress_of(data)
        if progress is None or attempt != self.attempt or attempt is None:
            self._print(Text(f"  {node_id}: {update_text(data)}"))
            return
        message = data.get("message") if isinstance(data.get("message"), str) else None
        if self.progress is None:
            self.progress = ProgressTrack.start(at, progress, message)
        else:
            self.progress.see(at, progress, message)

    def _origin(self, p: dict[str, Any]) -> None:
        """Say once where a fork or continuation comes from and what it carries."""
        if p.get("forkedFrom"):
            self.fork_start = True
            carried = ", ".join(p.get("carriedNodes") or []) or "nothing"
            self._print(Text(f"  forked from {p['forkedFrom']} at {p.get('forkNode')}; carried"
                             f" from it (done there, not run again): {carried}", style="cyan"))
        elif p.get("parentRunId"):
            self._print(Text(f"  continues {p['parentRunId']} with the answer at"
                             f" {p.get('startAt')}; the steps before it are carried from it"
                             " (done there, not run again)", style="cyan"))

    def _finished(self, node_id: str, kind: Any, p: dict[str, Any], at: int) -> None:
        node = self._node(node_id)
        result = p.get("result") or {}
        outcome = Outcome.OK if kind == "node_finished" else result.get("outcome", Outcome.FAILED)
        node.state, node.ended = outcome_word(outcome), at
        if self.current == node_id:
            self.current = None
        took = "" if node.started is None else f" after {duration_text(at - node.started)}"
        if outcome != Outcome.OK:
            self.failed_node = node_id
            self._print(Text(f"✗ {node_id} {outcome_word(outcome)}{took}: "
                             f"{error_text(result.get('errorCode'), result.get('error'))}",
                             style="red"))
            output = p.get("output")
            if isinstance(output, dict) and shell_output(output):  # its last words
                said = str(output.get("stderr") or output.get("stdout") or "")
                for line in said.rstrip("\n").splitlines()[-FAILED_LINES:]:
                    self._print(Text(f"  {_clean(line)}", style="dim"))
        message = notify_message(p.get("output"))
        if message is not None:
            self.told.add(message)
            self._print(Text(f"» {message}", style="bold"))

    def _output(self, record: dict[str, Any]) -> None:
        stream = str(record.get("stream"))
        if record.get("truncated"):
            logs = cli(self.project, "logs", *(w for w in (self.run_id, self.current) if w))
            self.tail.append(Text(f"… more {stream} is not shown here; `{logs}` has what the"
                                  " step kept", style="dim"))
            return
        text = self.partial.pop(stream, "") + str(record.get("text", ""))
        *lines, rest = text.split("\n")
        if rest:
            self.partial[stream] = rest
        style = "red" if stream == "stderr" else ""
        for line in lines:
            self.tail.append(Text(_clean(line), style=style))

    def _agent(self, record: dict[str, Any]) -> None:
        kind = record.get("kind")
        if kind == "text":
            for line in str(record.get("text", "")).splitlines()[-TAIL_LINES:]:
                self.tail.append(Text(_clean(line)))
        elif kind == "tool_start":
            self.tail.append(Text(f"tool {record.get('tool')} "
                                  f"{str(record.get('args', ''))[:200]}", style="cyan"))
        elif kind == "tool_end" and record.get("isError"):
            self.tail.append(Text(f"tool {record.get('tool')} failed", style="red"))

    # ---- drawing --------------------------------------------------------

    def _render(self) -> RenderableType:
        now = self.clock()
        head = Text(f"{self.workflow or 'run'}  ", style="bold")
        if self.title:
            head.append(f"{quoted(self.title)}  ", style="bold")
        head.append(self.run_id or "", style="dim")
        if self.started is not None and self.status is None:
            head.append(f"  {duration_text(now - self.started)}", style="dim")
        grid = Table.grid(padding=(0, 1))
        for node in self.nodes.values():
            mark, style = MARKS.get(node.state, ("·", ""))
            if node.state == RUNNING and node.started is not None:
                took = duration_text(now - node.started)
            elif node.started is not None and node.ended is not None:
                took = duration_text(node.ended - node.started)
            else:
                took = ""
            detail = node.detail if node.state == RUNNING and node.detail else ""
            grid.add_row(Text(mark, style=style), Text(node.id, style="bold" if
                                                       node.id == self.current else ""),
                         Text(node.state, style=style), Text(took, style="dim"),
                         Text(node.kind, style="dim"), Text(detail, style="italic"))
        parts: list[RenderableType] = [head, grid]
        if self.current is not None and self.progress is not None:
            parts.append(Text(f"  {self.current}  {self.progress.line(now)}", style="cyan"))
        lines = list(self.tail)
        if self.current is not None:
            lines += [Text(_clean(rest)) for rest in self.partial.values() if rest]
        if self.current is not None and lines:
            shown = Text("\n").join(lines[-TAIL_LINES:])
            shown.no_wrap, shown.overflow = True, "ellipsis"  # one row per line
            parts.append(Panel(shown, title=escape(self.current + mount_note(self.current)),
                               title_align="left",
                               border_style="dim", expand=True))
        return Group(*parts)

    def _draw(self, force: bool = False) -> None:
        if self.dead or (not force and time.monotonic() - self._drawn < REFRESH_S):
            return
        self._drawn = time.monotonic()
        try:
            if self.live is None:
                self.live = Live(self._render(), console=self.console, auto_refresh=False,
                                 transient=False, redirect_stdout=False, redirect_stderr=False)
                self.live.start(refresh=True)
            else:
                self.live.update(self._render(), refresh=True)
        except OSError:
            self.dead = True  # the terminal is gone

    def _print(self, text: Text) -> None:
        if self.dead:
            return
        try:
            self.console.print(text, soft_wrap=True)
        except OSError:
            self.dead = True

    def _stop(self) -> None:
        live, self.live = self.live, None
        if live is not None:
            with suppress(OSError):
                live.stop()

    def _summary(self, follower: TraceFollower, status: str) -> None:
        try:
            state = follower.bundle.state()
        except (BundleCorrupt, OSError, ValueError):
            return
        run_id = follower.bundle.run_id
        if status != state.get("status"):  # cancelled while it waited
            self._print(Text(f"✗ cancelled while it waited at {state.get('waitingNode')}",
                             style="bold red"))
            return
        took = ""
        if self.started is not None:
            took = f" in {duration_text(int(state.get('updatedAt') or 0) - self.started)}"
        if status == RunStatus.COMPLETED:
            self._print(Text(f"✓ completed{took}", style="bold green"))
            final = state.get("finalOutput")
            if notify_message(final) not in self.told:  # a message is not told twice
                self._print(Text(person_text(final)))
        elif status == RunStatus.WAITING and self.answered:
            self._print(Text(f"✓ answered at {state.get('waitingNode')}", style="bold green"))
            return  # the caller names the run the chain goes on in
        elif status == RunStatus.WAITING:
            summary = (state.get("waitingOutput") or {}).get("summary")
            self._print(Text(f"? waiting for an answer at {state.get('waitingNode')}",
                             style="bold cyan"))
            if summary:
                self._print(Text(str(summary)))
            if request := request_in(state.get("waitingOutput")):
                for line in request_lines(request, ""):
                    self._print(Text(line))
                for what, command in answer_steps(request, run_id, self.project):
                    self._print(Text(f"{what}: {command}"))
                return
        else:
            error: dict[str, Any] = dict(state.get("error") or {})
            self._print(Text(f"✗ {str(status).replace('_', ' ')}{took}: "
                             f"{error_text(error.get('code'), error.get('message'))}",
                             style="bold red"))
        failed = self.failed_node or state.get("lastNode")
        for what, command in next_steps(status, run_id, failed, self.project,
                                        fork_from=fork_default(follower.bundle)):
            self._print(Text(f"{what}: {command}"))
