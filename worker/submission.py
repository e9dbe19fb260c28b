"""Judging the `workflow` tool's calls for the agent step in progress.

Owns the verdict on one call (step and attempt must name the step in
progress; ``update`` records progress, text or ``{"progress", "message"}``;
``submit`` must pass the node's checks, and is accepted once), the lenient
reading of a submitted output, and the reminder text for a turn that ended
without a submission. Both the headless executor (``worker.pi_executor``)
and the in-session one (``worker.conversation``) judge through it, so a
step is checked the same wherever its conversation happens. Imports ``worker.agent`` only.
"""

from __future__ import annotations

import contextlib
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from .agent import AgentHooks, AgentRequest

REMINDER = ("You ended your turn without an accepted submission for workflow step {step}"
            " (attempt {attempt}). Finish the step and call the `workflow` tool with action"
            " `submit`, step `{step}`, attempt `{attempt}` and your result as `output`.")


def tolerant_update(value: Any) -> Any:
    """An ``update``: text holding a JSON object is that object; other text stays text."""
    if isinstance(value, str) and value.strip().startswith("{"):
        with contextlib.suppress(ValueError):
            return json.loads(value)
    return "" if value is None else value


def tolerant(value: Any) -> Any:
    """A submitted output: JSON sent as a string is the JSON it holds."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "[", '"') or text in ("true", "false", "null"):
            with contextlib.suppress(ValueError):
                return json.loads(text)
    return value


@dataclass
class Submission:
    """The node attempt in progress: what a `workflow` tool call may hand in for it."""

    request: AgentRequest
    hooks: AgentHooks
    accepted: bool = False
    output: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def verdict(self, call: dict[str, Any]) -> tuple[bool, str]:
        step, attempt = self.request.node_id, self.request.attempt_id
        if call.get("step") != step or call.get("attempt") != attempt:
            return False, (f"this call names step {call.get('step')!r} attempt"
                           f" {call.get('attempt')!r}, but the step in progress is {step!r}"
                           f" attempt {attempt!r}; call again with those")
        action = call.get("action")
        if action == "update":
            refused = self.hooks.update(tolerant_update(call.get("update")))
            if refused:
                return False, (f"Update refused: {refused}. Send text, or an object like"
                               ' {"progress": {"done": 3, "total": 10}, "message": "..."}.')
            return True, "Progress recorded; carry on with the step."
        if action != "submit":
            return False, "action must be submit or update"
        with self.lock:
            if self.accepted:
                return True, "The step was already accepted."
            output = tolerant(call.get("output"))
            reason = self.hooks.check(output)
            if reason:
                return False, f"Submission rejected: {reason}. Fix the result and submit again."
            # ``validate`` may have replaced it (issue 23, item 7): keep what the node outputs.
            keep = getattr(self.hooks, "output_for", None)
            self.accepted, self.output = True, keep(output) if callable(keep) else output
        return True, "Accepted: the step is complete."
