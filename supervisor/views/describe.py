"""``pi-workflows status RUN`` for a person: one run described, with what to do next.

Owns the human view of one run: the status line as its header, when it
started and ended, its chain, its steps with their states and durations
(carried ones named as carried, with the run they come from), and the block
its state calls for, each with the exact command to paste: a waiting run's
question and its ``answer`` command, a completed run's final output
(bounded), a failed run's error and its ``logs`` and ``fork`` commands, a
parked run's reason and what resumes it. ``status --json`` is
``views.status``'s and is not shaped here. Reads the store and the bundle
only. Imports ``protocol`` and the views wing (status, steplogs, wording,
nextcmd); never another wing, never rich.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ...protocol.artifacts import internalize
from ...protocol.bundle import Bundle, BundleCorrupt
from ...protocol.states import CLAIMED, SETTLED_STATUSES, QueueState, RunStatus
from ...protocol.store import QueueRow, Store
from .decisions import answer_steps, answered_text, request_lines
from .holds import chat_hold, hold_text
from .mounts import MOUNT_KIND
from .nextcmd import fork_command, fork_default, next_steps
from .runtext import detail_suffix
from .status import chain_lines, shown_state, status_line, status_with_chain
from .steplogs import INTERRUPTED, RUNNING, WAITING, read_steps
from .timefmt import duration
from .wording import cli, error_text, outcome_word, person_text

MAX_STEPS = 40  # step lines shown; a long loop's earlier ones are left to `logs`
OUTPUT_LINES = 20  # of the final output
LINE_CHARS = 300


def describe(store: Store, row: QueueRow, runs_dir: Path, now_ms: int,
             project: Path | None) -> list[str]:
    """Every line of ``status RUN``'s human output."""
    info = status_with_chain(store, row, runs_dir)
    bundle = Bundle(runs_dir, row.run_id)
    hold = chat_hold(store, row)
    held = [f"  waits: {hold_text(hold)}"] if hold is not None else []
    lines = [status_line(info, now_ms), *held, *_when(info, now_ms), *chain_lines(info)]
    child = store.child_by_run(row.run_id) if row.origin_session is None else None
    if child is not None:
        lines.append(f"  controller {child.controller}/{child.key}: request"
                     f" {child.request_key}, attempt {child.attempt}")
    if answered := answered_text(info):
        lines.append(f"  {answered}")
    lines += _steps(bundle, info, now_ms, project)
    lines += _block(info, row, bundle, project)
    return lines


def _clock(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def _when(info: dict[str, Any], now_ms: int) -> list[str]:
    started, finished = info.get("startedAt"), info.get("finishedAt")
    if started is None:
        return [f"  created {_clock(info['createdAt'])}, not started yet"]
    text = f"  started {_clock(started)}"
    if finished is not None:
        text += f", ended {_clock(finished)}, took {duration(finished - started)}"
    elif info["queueState"] in CLAIMED:
        text += f", running for {duration(now_ms - started)}"
    return [text]


def _steps(bundle: Bundle, info: dict[str, Any], now_ms: int,
           project: Path | None) -> list[str]:
    if not bundle.exists():
        return []
    try:
        logs = read_steps(bundle)
        state = bundle.raw_state()
    except (BundleCorrupt, OSError, ValueError) as exc:
        return [f"  steps: the bundle cannot be read ({exc})"]
    ran = {log.node_id for log in logs}
    origin = info.get("forkedFrom") or info.get("parentRunId")
    kinds = _kinds(bundle)
    rows: list[tuple[str, str, str, str]] = []
    if origin:
        # In definition order; an include's entry and exit nodes are not steps (its
        # own run does not list them), and one passed here is not carried at all.
        results = state.get("results") or {}
        carried = [n for n in kinds if n in results] + [n for n in results if n not in kinds]
        rows += [(node, "carried", "", f"{kinds.get(node, '')}  (from {origin})".lstrip())
                 for node in carried if node not in ran and kinds.get(node) != MOUNT_KIND]
    answered = bool(info.get("continuedBy"))
    owned = info["queueState"] in CLAIMED
    for log in logs:
        outcome = log.outcome
        if outcome == RUNNING and not owned:
            outcome = INTERRUPTED  # no runner holds it: its worker is gone
        end = log.ended_at if log.ended_at is not None else (
            now_ms if outcome == RUNNING else None)
        took = "" if end is None else duration(end - log.started_at)
        word = outcome_word(outcome)
        if outcome == WAITING:  # the wait is over once answered or cancelled
            word = "answered" if answered else (
                "cancelled" if info["runStatus"] == RunStatus.CANCELLED else word)
        kind = f"{log.kind} in the session" if log.via == "session" else log.kind
        rows.append((log.node_id, word, took, kind))
    if not rows:
        return ["  steps: none yet"]
    lines = ["  steps:"]
    if len(rows) > MAX_STEPS:
        every = cli(project, "logs", info["runId"])
        lines.append(f"    … {len(rows) - MAX_STEPS} earlier steps (`{every}` has every one)")
        rows = rows[-MAX_STEPS:]
    width = max(len(node) for node, *_ in rows)
    words = max(len(word) for _, word, *_ in rows)
    for node, word, took, kind in rows:
        lines.append(f"    {node:<{width}}  {word:<{words}}  {took:>8}  {kind}".rstrip())
    return lines


def _kinds(bundle: Bundle) -> dict[str, str]:
    try:
        nodes = bundle.snapshot().get("nodes") or []
    except (BundleCorrupt, OSError, ValueError):
        return {}
    return {str(n.get("id")): str(n.get("kind", "")) for n in nodes if isinstance(n, dict)}


def _bounded(text: str) -> tuple[list[str], bool]:
    """At most ``OUTPUT_LINES`` lines of ``text``, each cut short; whether anything was cut."""
    lines = text.splitlines() or [""]
    head = lines[:OUTPUT_LINES]
    shown = [line if len(line) <= LINE_CHARS else line[:LINE_CHARS - 1] + "…" for line in head]
    return shown, len(lines) > len(head) or shown != head


def _final_output(info: dict[str, Any], bundle: Bundle, project: Path | None) -> list[str]:
    try:
        value = internalize(info.get("finalOutput"), bundle.artifacts.get)
    except (OSError, ValueError):
        value = info.get("finalOutput")
    shown, cut = _bounded(person_text(value))
    lines = ["  output:", *(f"    {line}" for line in shown)]
    if cut:
        whole = cli(project, "status", info["runId"], "--json")
        lines.append(f"    … cut short here; all of it: `{whole}` (its finalOutput)")
    return lines


def _waiting_data(info: dict[str, Any], bundle: Bundle, project: Path | None) -> list[str]:
    """What ``checkpoint(run=)`` computed for the person who answers."""
    try:
        value = internalize(info["waitingData"], bundle.artifacts.get)
    except (OSError, ValueError):
        value = info["waitingData"]
    shown, cut = _bounded(person_text(value))
    lines = ["    data:", *(f"      {line}" for line in shown)]
    if cut:
        whole = cli(project, "status", info["runId"], "--json")
        lines.append(f"      … cut short here; all of it: `{whole}` (its waitingData)")
    return lines


def _block(info: dict[str, Any], row: QueueRow, bundle: Bundle,
           project: Path | None) -> list[str]:
    run_id, status, queue = info["runId"], info["runStatus"], info["queueState"]
    state = shown_state(info)
    if info.get("continuedBy"):
        end = info["chain"][-1]
        return [f"  answered: the chain goes on as {end['runId']} ({end['state']});"
                f" `{cli(project, 'status', end['runId'])}`"]
    if info.get("paused"):
        return _paused(info, project)
    if queue in CLAIMED:
        return _running(info, project)
    if queue == QueueState.QUEUED:
        return _queued(row, project)
    if queue == QueueState.PARKED:
        return _parked(row, project)
    if status == RunStatus.WAITING:
        lines = [f"  waiting for an answer at {info.get('waitingOn')}"]
        if info.get("summary"):
            lines += [f"    {line}" for line in _bounded(str(info["summary"]))[0]]
        if "waitingData" in info:
            lines += _waiting_data(info, bundle, project)
        lines += request_lines(info.get("request"))
        return lines + _commands(answer_steps(info.get("request"), run_id, project)
                                 or next_steps(status, run_id, None, project))
    if status == RunStatus.COMPLETED:
        return _final_output(info, bundle, project) + _commands(
            next_steps(status, run_id, None, project))
    error = error_text(info.get("errorCode"), info.get("error"))
    if not bundle.exists():
        if queue == QueueState.CANCELLED:
            return ["  cancelled before it started; start the workflow again to run it"]
        return [f"  {state}: {error}",
                "  it never started, so there is nothing to fork: start the workflow again"]
    if status not in SETTLED_STATUSES:  # the queue ended it and the bundle never heard
        status = RunStatus.FAILED if queue == QueueState.FAILED else RunStatus.CANCELLED
    if status in (RunStatus.FAILED, RunStatus.TIMED_OUT):
        where = fork_default(bundle)
        word = str(status).replace("_", " ")
        lines = [f"  {word}" + (f" at {where}" if where else "") + f": {error}"]
        return lines + _commands(next_steps(status, run_id, where, project, fork_from=where))
    lines = ["  cancelled" + (f": {info['error']}" if info.get("error") else "")]
    lines += _commands([("run it again from a node", fork_command(project, run_id, status, None))])
    nodes = list(_kinds(bundle))
    return lines + ([f"  its nodes: {', '.join(nodes)}"] if nodes else [])


def _commands(steps: list[tuple[str, str]]) -> list[str]:
    return [f"  {what}: {command}" for what, command in steps]


def _running(info: dict[str, Any], project: Path | None) -> list[str]:
    run_id = info["runId"]
    if info.get("cancelRequested"):
        head = "  cancel requested: the step in progress is being stopped"
    elif info.get("pauseRequested"):
        head = ("  pause requested: the step in progress finishes, then the run holds"
                + (f" (now at {info['currentNode']})" if info.get("currentNode") else ""))
    else:
        where = f" at {info['currentNode']}" if info.get("currentNode") else ""
        where += detail_suffix(info.get("statusDetail")) if where else ""
        head = f"  {info['queueState']}{where}"  # starting or running
    return [head, f"  follow it: {cli(project, 'watch', run_id)}"]


def _paused(info: dict[str, Any], project: Path | None) -> list[str]:
    run_id = info["runId"]
    where = f" before {info['currentNode']}" if info.get("currentNode") else ""
    return [f"  paused{where}: no runner takes it until it is resumed",
            f"  continue it: {cli(project, 'resume', run_id)}"
            f" (or here: {cli(project, 'resume', run_id, '--here')})",
            f"  or end it: {cli(project, 'cancel', run_id)}"]


def _queued(row: QueueRow, project: Path | None) -> list[str]:
    if row.origin_session is not None:
        # A session's reservation: no host starts it, its session activates it.
        return ["  reserved for its session; nothing runs until it is activated",
                f"  start it: {cli(project, 'activate', '--session', row.origin_session)}"]
    return ["  queued: a running host starts it",
            f"  start a host if none runs: {cli(project, 'host', '--background')}",
            f"  follow it: {cli(project, 'watch', row.run_id)}"]


def _parked(row: QueueRow, project: Path | None) -> list[str]:
    run_id = row.run_id
    if row.error_code == "source_changed":
        return ["  parked: its workflow file changed since it started; check the change, then",
                f"  continue on it: {cli(project, 'resume', run_id, '--force')}"]
    if row.error_code is not None:
        return [f"  parked, blocked: {error_text(row.error_code, row.error_message)}",
                f"  once the cause is fixed: {cli(project, 'resume', run_id)}"]
    return ["  parked: it continues where it stopped once a runner takes it",
            f"  a host resumes it: {cli(project, 'host', '--background')}",
            f"  or run it here now: {cli(project, 'resume', run_id, '--here')}"]
