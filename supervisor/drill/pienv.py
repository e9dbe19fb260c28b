"""The drill's model script: what the scripted model answers a drill's Pi.

Owns the drill's replies (submit a small output for the step in progress; in a
Pi session of the drill's own, ``insession``, first start the workflow its
prompt names, and in some cancel it) and the words that ask for them. The Pi
environment they run in is ``supervisor.model.pienv``. Imports
``supervisor.model``; never the worker.
"""

from __future__ import annotations

import re

from ..model.pienv import attempt_in, step_in_progress
from ..model.scripted import Reply, Request, Text, ToolCalls, call, message_text

# What the drill tells a Pi session of its own (``insession``): its model starts the run.
START_WORDS = "pi-workflows drill: start the workflow"
START = re.compile(re.escape(START_WORDS) + r" `([A-Za-z0-9_.-]+)`")
# ... and, in some sessions, cancel it (the agent's own cancel: a deferred turn follows).
CANCEL_WORDS = "then cancel it when its step arrives"


def _submit(attempt: str) -> Reply:
    node = attempt.rsplit("-", 2)[0]
    return ToolCalls(call("workflow", {"action": "submit", "step": node, "attempt": attempt,
                                       # ``route``: a decision's choice (the workload's
                                       # ``pick`` decides between go and stop).
                                       "output": {"ok": True, "route": "go"}}), delay=0.3)


def drill_reply(request: Request) -> Reply | None:
    """Submit ``{"ok": true, "route": "go"}`` for the step in progress after a short
    think (the think is the window in which the drill may kill the Pi child mid-request).

    In a Pi session of the drill's own (its first prompt has ``START_WORDS``) the
    model starts the named workflow, and submits only when the newest user message
    is a step message or a reminder (or, told ``CANCEL_WORDS``, cancels the run
    then, so the run ends by the agent's own cancel and a deferred turn follows):
    the session's later turns (a report, a follow-up) are answered with text,
    never with a submit of an old step.
    """
    messages = request.messages
    last = messages[-1] if messages else {}
    users = [message_text(m) for m in messages if m.get("role") == "user"]
    started = START.search(users[0]) if users else None
    if started is not None:
        if last.get("role") == "tool":
            return Text("noted", delay=0.05)
        attempt = attempt_in(users[-1:])
        if attempt is not None and CANCEL_WORDS in users[0]:
            return ToolCalls(call("workflow", {"action": "cancel"}), delay=0.3)
        if attempt is not None:
            return _submit(attempt)
        if len(users) == 1:
            return ToolCalls(call("workflow", {"action": "start",
                                               "workflow": started.group(1)}), delay=0.05)
        return Text("nothing to do", delay=0.05)
    attempt = step_in_progress(request)
    if attempt is None:
        return Text("nothing to do", delay=0.05)
    if last.get("role") == "tool":  # the submit was answered: end the turn plainly
        return Text("submitted")
    return _submit(attempt)
