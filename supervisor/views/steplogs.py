"""The steps of a run and what each printed or produced, read from its bundle.

Owns rebuilding one record per node attempt from the trace (when it started
and ended, its outcome and output, with large strings read back from
``artifacts/``), the agent text captured for it, and, for an attempt still
running or cut off, the shell output streamed so far (``output.ndjson``).
Reads only; never writes a bundle. Imports ``protocol`` only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...protocol.artifacts import internalize
from ...protocol.bundle import Bundle, BundleCorrupt
from ...protocol.states import RunStatus
from ...protocol.updates import update_data

RUNNING, WAITING, INTERRUPTED = "running", "waiting", "interrupted"


@dataclass
class StepLog:
    node_id: str
    attempt_id: str
    step: int | None
    kind: str
    started_at: int
    ended_at: int | None = None
    outcome: str = RUNNING  # an Outcome once it ended; running, waiting or interrupted
    error_code: str | None = None
    error: str | None = None
    output: Any = None
    streamed: list[tuple[str, str]] = field(default_factory=list)  # (stream, text)
    stream_cut: bool = False  # the live copy hit its cap
    agent: list[str] = field(default_factory=list)
    traceback: dict[str, Any] | None = None  # where a failed step's exception was raised
    via: str | None = None  # an agent step's conversation: "session" or "headless"
    updates: list[dict[str, Any]] = field(default_factory=list)  # its progress updates
    exit_code: int | None = None  # a shell step's exit status, from its result record
    status_detail: str | None = None  # what the node said it was doing when it started

    @property
    def over(self) -> bool:
        return self.outcome != RUNNING

    def as_json(self) -> dict[str, Any]:
        out = self.output if isinstance(self.output, dict) else {}
        shell = "exitCode" in out and "stdout" in out
        return {
            "nodeId": self.node_id, "attemptId": self.attempt_id, "step": self.step,
            "kind": self.kind, "outcome": self.outcome, "startedAt": self.started_at,
            "endedAt": self.ended_at,
            "durationMs": None if self.ended_at is None else self.ended_at - self.started_at,
            "errorCode": self.error_code, "error": self.error,
            "stdout": out.get("stdout") if shell else self.stream_text("stdout"),
            "stderr": out.get("stderr") if shell else self.stream_text("stderr"),
            "exitCode": out.get("exitCode") if shell else self.exit_code,
            "output": self.output, "agent": self.agent, "traceback": self.traceback,
            "via": self.via, "updates": self.updates, "statusDetail": self.status_detail,
        }

    def stream_text(self, stream: str) -> str | None:
        parts = [text for name, text in self.streamed if name == stream]
        return "".join(parts) if parts else None


def _records(path: Path) -> list[dict[str, Any]]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for line in data.split(b"\n"):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # the torn last line of a file being written
        if isinstance(record, dict):
            out.append(record)
    return out


def read_steps(bundle: Bundle) -> list[StepLog]:
    """Every node attempt of the run, in the order they started."""
    return fold_steps(bundle.snapshot(), bundle.raw_state(), bundle.events(),
                      _records(bundle.output_path),
                      _records(bundle.session_dir / "events.ndjson"),
                      lambda value: _resolve(bundle, value))


def fold_steps(snapshot: Mapping[str, Any], state: Mapping[str, Any],
               events: list[dict[str, Any]], output: list[dict[str, Any]],
               capture: list[dict[str, Any]],
               resolve: Callable[[Any], Any] = lambda value: value) -> list[StepLog]:
    """The attempts from what a bundle holds, already read (the view stream keeps these
    lists as it tails the files); ``resolve`` reads large strings back, or leaves them."""
    kinds = {n.get("id"): str(n.get("kind", "")) for n in snapshot.get("nodes") or []
             if isinstance(n, dict)}
    steps: dict[str, StepLog] = {}
    order: list[StepLog] = []
    for event in events:
        attempt, node, kind = event.get("attemptId"), event.get("nodeId"), event.get("type")
        p, at = event.get("payload") or {}, int(event.get("at", 0))
        if kind == "node_started" and attempt and node:
            for earlier in order:  # a rerun: the attempt before it was cut off
                if earlier.node_id == node and earlier.outcome == RUNNING:
                    earlier.outcome = INTERRUPTED
            log = StepLog(node, attempt, p.get("step"), kinds.get(node, ""), at)
            detail = p.get("statusDetail")
            log.status_detail = detail if isinstance(detail, str) else None
            steps[attempt] = log
            order.append(log)
        elif kind in ("node_finished", "node_failed") and attempt in steps:
            log = steps[attempt]
            result = p.get("result") or {}
            log.ended_at, log.outcome = at, str(result.get("outcome", "ok"))
            log.error_code, log.error = result.get("errorCode"), result.get("error")
            code = result.get("exitCode")  # the record keeps it when parse= shaped the output
            log.exit_code = code if isinstance(code, int) and not isinstance(code, bool) \
                else None
            log.output = resolve(p.get("output"))
            found = p.get("traceback")
            log.traceback = found if isinstance(found, dict) else None
        elif kind == "update_published" and attempt in steps:
            steps[attempt].updates.append(update_data(p))
        elif kind == "agent_prompt_sent" and attempt in steps:
            steps[attempt].via = str(p.get("via") or "headless")
        elif kind == "run_waiting" and attempt in steps:
            steps[attempt].outcome = WAITING
            steps[attempt].ended_at = at
            steps[attempt].output = resolve(p.get("output"))  # a long question
    live = state.get("currentAttempt") if state.get("status") == RunStatus.RUNNING else None
    for log in order:
        if log.outcome == RUNNING and log.attempt_id != live:
            log.outcome = INTERRUPTED
    for record in output:
        owner = steps.get(str(record.get("attemptId")))
        if owner is None:
            continue
        if record.get("truncated"):
            owner.stream_cut = True
        elif isinstance(record.get("text"), str):
            owner.streamed.append((str(record.get("stream")), record["text"]))
    for record in capture:
        owner = steps.get(str(record.get("attemptId")))
        if owner is not None and record.get("kind") == "text":
            owner.agent.append(str(record.get("text", "")))
        elif owner is not None and record.get("kind") == "tool_start":
            owner.agent.append(f"[tool {record.get('tool')}] {record.get('args', '')}")
    return order


def _resolve(bundle: Bundle, value: Any) -> Any:
    try:
        return internalize(value, bundle.artifacts.get)
    except (OSError, ValueError) as exc:
        raise BundleCorrupt(f"run {bundle.run_id}: an artifact of a step's output is missing"
                            f" ({type(exc).__name__})") from None


def traceback_lines(record: dict[str, Any] | None) -> list[str]:
    """A step's recorded traceback as Python prints one (frames only, no source)."""
    if not record:
        return []
    frames = [f for f in record.get("frames") or [] if isinstance(f, dict)]
    lines = ["Traceback (most recent call last):"]
    omitted, after = record.get("omitted"), record.get("omittedAfter")
    for index, frame in enumerate(frames):
        if index == after and isinstance(omitted, int) and omitted > 0:
            lines.append(f"  ... {omitted} more frame(s) ...")
        lines.append(f'  File "{frame.get("file")}", line {frame.get("line")},'
                     f' in {frame.get("function")}')
    lines.append(str(record.get("exception") or ""))
    return lines


def last_failure(bundle: Bundle) -> StepLog | None:
    """The run's last step that failed with a recorded traceback, or None."""
    failed = [s for s in read_steps(bundle) if s.traceback]
    return failed[-1] if failed else None
