"""The agent-step interface and the deterministic scripted executor.

Owns what the engine asks of an agent (``AgentExecutor``), the step contract
appended to every prompt, the check of a submission against
``expected_output`` (``schema_problem``; ``worker.steps`` adds the node's
``validate``), and ``ScriptedExecutor`` for tests. The real Pi executor
implements the same interface elsewhere. Imports ``protocol`` only.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..protocol.states import Outcome

STEP_CONTRACT = """

---
Workflow step contract (pi-workflows): workflow {workflow}, step {step}, attempt {attempt}.
When the step is done, call the `workflow` tool once with:
  {{"action": "submit", "step": "{step}", "attempt": "{attempt}", "output": <your result>}}
To report progress on the way, call it with:
  {{"action": "update", "step": "{step}", "attempt": "{attempt}", "update": "<short message>"}}
(or "update": {{"progress": {{"done": 3, "total": 10}}, "message": "<short message>"}}).
If a submission is rejected, read the reason, fix the result and submit again."""


RETRY_NOTE = """
This is a retry: attempt {interrupted} of this step was interrupted before it finished
(its result, if any, was not recorded). Only attempt {attempt} counts now: do the step
again from its start and submit with attempt "{attempt}"; a submission for
{interrupted} is refused."""


def with_contract(prompt: str, expected_output: Mapping[str, Any] | None, *,
                  workflow: str | None = None, step: str = "", attempt: str = "",
                  interrupted: str | None = None) -> str:
    """The node's prompt plus the step contract (docs/agents.md shows the format).

    ``interrupted``: the attempt this one redoes. The conversation may still
    hold that attempt's prompt, so the model is told plainly which one counts.
    """
    text = prompt + STEP_CONTRACT.format(workflow=workflow or "?", step=step, attempt=attempt)
    if interrupted is not None and interrupted != attempt:
        text += RETRY_NOTE.format(interrupted=interrupted, attempt=attempt)
    if expected_output:
        text += "\nThe output must match this JSON schema:\n" + json.dumps(
            expected_output, sort_keys=True)
    return text


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,),
    "number": (int, float), "integer": (int,), "null": (type(None),),
}


def schema_problem(value: Any, schema: Mapping[str, Any], where: str = "output") -> str | None:
    """A small JSON-schema subset: type, required, properties, items, enum."""
    expected = schema.get("type")
    if isinstance(expected, str) and expected in _TYPES:
        ok = isinstance(value, _TYPES[expected])
        if expected in ("number", "integer") and isinstance(value, bool):
            ok = False
        if not ok:
            return f"{where} must be of type {expected}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where} must be one of {schema['enum']}"
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                return f"{where} is missing required field {key!r}"
        for key, sub in dict(schema.get("properties", {})).items():
            if key in value and isinstance(sub, Mapping):
                problem = schema_problem(value[key], sub, f"{where}.{key}")
                if problem:
                    return problem
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            problem = schema_problem(item, schema["items"], f"{where}[{i}]")
            if problem:
                return problem
    return None


@dataclass(frozen=True)
class AgentRequest:
    run_id: str
    node_id: str
    attempt_id: str
    prompt: str
    expected_output: Mapping[str, Any] | None
    timeout_s: float | None


@dataclass
class AgentResult:
    outcome: Outcome
    output: Any = None
    error_code: str | None = None
    error: str | None = None


class AgentHooks(Protocol):
    def prompt_sent(self, prompt: str, via: str = "headless") -> None: ...
    # Text, or an object like {"progress": {...}, "message": ...}; the reason it was
    # refused, or None.
    def update(self, message: Any) -> str | None: ...
    def check(self, submission: Any) -> str | None: ...


class AgentExecutor(Protocol):
    def run(self, request: AgentRequest, hooks: AgentHooks, stop: threading.Event) -> AgentResult:
        ...


def warm_up(agent: object) -> None:
    """Let an executor that can (``warm()``) get its agent ready before it is needed."""
    warm = getattr(agent, "warm", None)
    if callable(warm):
        warm()


@dataclass
class ScriptedExecutor:
    """Replays scripted submissions per node; a rejection moves to the next one.

    Each script entry is a submission value, or a callable returning one, or
    ``("update", message)`` to publish progress first.
    """

    script: Mapping[str, Sequence[Any]]
    prompts: list[tuple[str, str]] = field(default_factory=list)
    rejections: list[tuple[str, str]] = field(default_factory=list)

    def run(self, request: AgentRequest, hooks: AgentHooks, stop: threading.Event) -> AgentResult:
        hooks.prompt_sent(request.prompt)
        self.prompts.append((request.node_id, request.prompt))
        for entry in self.script.get(request.node_id, ()):
            if stop.is_set():
                return AgentResult(Outcome.CANCELLED, error="stopped")
            if isinstance(entry, tuple) and len(entry) == 2 and entry[0] == "update":
                hooks.update(entry[1])
                continue
            value = entry() if isinstance(entry, Callable) else entry  # type: ignore[arg-type]
            reason = hooks.check(value)
            if reason is None:
                return AgentResult(Outcome.OK, output=value)
            self.rejections.append((request.node_id, reason))
        return AgentResult(Outcome.FAILED, error_code="agent_no_submission",
                           error="the agent ended without an accepted submission")
