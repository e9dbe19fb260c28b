"""The ``logs`` command: every step of a run with what it printed and produced.

Owns printing ``supervisor.views.steplogs`` records like ``gh run view --log``: a
header per step (node, step, attempt, outcome, duration), then its output
and, for a step that raised, where (its recorded traceback);
``--follow`` keeps printing, including a running shell step's output as it is
produced, until the run settles. ``register(app)`` adds the command. Reads
only. Must not import the worker or another command module.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from ....protocol.bundle import Bundle
from ....protocol.definitions.requests import request_in
from ....protocol.errors import UsageError
from ....protocol.jsonenc import compact_json
from ....protocol.states import CLAIMED, TERMINAL, Outcome, QueueState
from ....protocol.store import Store
from ...views.decisions import request_lines
from ...views.progress import updates_summary
from ...views.runref import existing_row, project_store
from ...views.steplogs import (
    INTERRUPTED,
    RUNNING,
    WAITING,
    StepLog,
    read_steps,
    traceback_lines,
)
from ...views.wording import duration_text, error_text, notify_message, outcome_word, shell_output
from ..options import JsonOpt, ProjectOpt, RunArg, emit_json, project_context

POLL_S = 0.2


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def header(log: StepLog) -> str:
    where = f"step {log.step}, " if log.step is not None else ""
    how = outcome_word(log.outcome) if log.outcome not in (RUNNING, INTERRUPTED) \
        else log.outcome
    if log.ended_at is not None and log.outcome != WAITING:
        how += f" in {duration_text(log.ended_at - log.started_at)}"
    return f"=== {log.node_id} ({where}attempt {log.attempt_id}): {how} ===\n"


def _text(value: str) -> str:
    return value if not value or value.endswith("\n") else value + "\n"


def streamed(log: StepLog, start: int = 0) -> str:
    """The live copy of a shell step's output from part ``start`` on, as it was printed."""
    out = "".join(text for _, text in log.streamed[start:])
    if log.stream_cut and log.over:
        out = _text(out) + "(the live copy of this output was cut at its size limit)\n"
    return out


def body(log: StepLog, *, skip_stream: bool = False) -> str:
    """Everything a finished (or cut-off) step printed and produced, after its header."""
    parts: list[str] = [_text(line) for line in log.agent]
    value = log.output
    if shell_output(value):
        if not skip_stream:
            parts.append(_text(str(value.get("stdout") or "")))
            if value.get("stderr"):
                parts.append("--- stderr ---\n" + _text(str(value["stderr"])))
        if value.get("truncated"):
            parts.append("(output beyond the step's max_output_bytes was not kept)\n")
        if value.get("exitCode"):
            parts.append(f"(exit code {value['exitCode']})\n")
    else:
        if log.streamed and not skip_stream:
            parts.append(_text(streamed(log)))
        if log.exit_code:  # a shell step whose parse= shaped its output
            parts.append(f"(exit code {log.exit_code})\n")
        message = notify_message(value)
        if log.outcome == WAITING and isinstance(value, dict):
            summary = value.get("summary")
            parts.append("waiting for an answer" + (f": {summary}\n" if summary else "\n"))
            parts += [line + "\n" for line in request_lines(request_in(value), "  ")]
        elif message is not None:
            parts.append(_text(message))
        elif isinstance(value, str):
            parts.append(_text(value))
        elif value is not None:
            parts.append(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True) + "\n")
    summary = updates_summary(log.updates)
    if summary is not None:
        parts.append(summary + "\n")
    if log.error_code or log.error:
        parts.append(f"error: {error_text(log.error_code, log.error)}\n")
    parts.extend(line + "\n" for line in traceback_lines(log.traceback))
    return "".join(parts)


@dataclass
class _Shown:
    header: bool = False
    parts: int = 0  # streamed parts printed
    done: bool = False


class Printer:
    """What has been printed of each attempt, so following prints each thing once."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.shown: dict[str, _Shown] = {}

    def step(self, log: StepLog, *, final: bool) -> None:
        seen = self.shown.setdefault(log.attempt_id, _Shown())
        if seen.done:
            return
        if self.as_json:
            if log.over or final:
                _write(compact_json(log.as_json()) + "\n")
                seen.done = True
            return
        if log.over or final:
            if not seen.header:
                _write(header(log) + body(log))
            else:
                rest = streamed(log, seen.parts)
                _write(_text(rest) if rest else "")
                _write(header(log) + body(log, skip_stream=True))
            seen.done = True
            return
        if not seen.header:
            _write(header(log))
            seen.header = True
        _write(streamed(log, seen.parts))
        seen.parts = len(log.streamed)


def _steps(bundle: Bundle, node: str | None, running: bool) -> list[StepLog]:
    try:
        steps = read_steps(bundle)
    except FileNotFoundError:
        return []
    if node is not None:
        known = [str(n.get("id")) for n in bundle.snapshot().get("nodes") or []
                 if isinstance(n, dict)]
        if node not in known:
            raise UsageError(f"run {bundle.run_id} has no node {node!r}; its nodes are"
                             f" {', '.join(known)}",
                             code="node_not_found")
        steps = [s for s in steps if s.node_id == node]
    if not running:  # parked or given back: nobody runs it now
        for log in steps:
            if log.outcome == RUNNING:
                log.outcome = INTERRUPTED
    return steps


def follow_logs(store: Store, runs_dir: Path, run: str, node: str | None, *,
                as_json: bool, follow: bool, poll_s: float = POLL_S) -> None:
    bundle = Bundle(runs_dir, run)
    printer = Printer(as_json)
    collected: list[dict[str, Any]] = []
    while True:
        row = store.get(run)
        settled = row is None or row.state in TERMINAL
        running = row is not None and row.state in CLAIMED
        steps = _steps(bundle, node, running) if bundle.exists() else []
        if row is not None and row.cancel_requested and row.state == QueueState.DONE:
            for log in steps:  # the wait was closed by `cancel`: nobody answers it now
                if log.outcome == WAITING:
                    log.outcome = Outcome.CANCELLED
        if as_json and not follow:
            collected = [s.as_json() for s in steps]
            break
        last = settled or not follow
        for log in steps:
            printer.step(log, final=last)
        if last:
            break
        time.sleep(poll_s)
    if as_json and not follow:
        emit_json({"runId": run, "node": node, "steps": collected})
    elif not bundle.exists() and not as_json:
        state = "gone" if row is None else row.state
        _write(f"run {run} has no steps yet (it is {state})\n")


def logs_command(
    run: RunArg,
    node: Annotated[str | None, typer.Argument(
        help="Only this node's steps.", show_default=False)] = None,
    follow: Annotated[bool, typer.Option(
        "--follow", "-f", help="Keep printing as the run goes on, until it settles.")] = False,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Show what each step of a run printed and produced, from its bundle.

    A header per step (node, step, attempt, outcome, duration), then its
    output: a shell step's stdout and stderr, an agent's text, a step's
    result. With --follow, a running step's output is printed as it is
    produced, and the command returns when the run settles. --json: one
    object {"runId", "node", "steps": [...]}; with --follow, one step object
    per line as each step ends.

    Example: pi-workflows logs 99624cea build --follow
    """
    settings, paths = project_context(project)
    with project_store(settings, paths) as store:
        run = existing_row(store, run, paths).run_id
        follow_logs(store, paths.runs_dir, run, node, as_json=as_json, follow=follow)


def register(app: typer.Typer) -> None:
    app.command("logs")(logs_command)
