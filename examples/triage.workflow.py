"""Triage an issue report with a Pi agent's decision, and route on it.

Shows a run ``title`` computed from the input (shown by ``list``, ``status``,
``watch`` and the Pi footer), a ``decision`` (an agent step that must pick
one of its choices: any other value is refused and the model submits again),
a ``decision_edge`` with one case per choice (``validate`` refuses a missing
or extra one), a ``status_detail`` shown while a step runs, and ``ctx.state``.

Run input: the issue text, as the task words, or ``{"text": "..."}``.
"""

from __future__ import annotations

from typing import Any

from pi_workflows import (
    NodeContext,
    compute,
    decision,
    decision_edge,
    define_workflow,
    edge,
    notify,
)

CHOICES = ["bug", "feature", "question"]


def parse_input(raw: Any) -> dict[str, str]:
    """The issue text, as the task words or ``{"text": ...}``."""
    if isinstance(raw, dict):
        raw = raw.get("text", raw.get("task"))
    if isinstance(raw, str) and raw.strip():
        return {"text": raw.strip()}
    raise ValueError("give the issue text to triage")


def title(run_input: dict[str, str]) -> str:
    """The run's title: the first line of the issue (the worker cuts it to one short line)."""
    return "Triage: " + run_input["text"].splitlines()[0][:60]


def context(ctx: NodeContext) -> str:
    return f"The issue, as reported:\n\n{ctx.input['text']}"


def label(kind: str) -> Any:
    def apply(ctx: NodeContext) -> dict[str, Any]:
        reason = ctx.outputs["classify"].get("reason", "")
        return {"label": kind, "reason": reason, "run": ctx.state.run_id if ctx.state else None}
    apply.__qualname__ = f"label_{kind}"
    return apply


def report(ctx: NodeContext) -> str:
    result = next(ctx.outputs[k] for k in ("bug", "feature", "question") if k in ctx.outputs)
    title = ctx.state.title if ctx.state else None
    return f"{title or 'The issue'} is a {result['label']}: {result['reason'] or 'no reason given'}"


workflow = define_workflow(
    description="Triage an issue: a Pi agent decides bug, feature or question.",
    input=parse_input,
    title=title,
    start_at="classify",
    nodes=[
        decision("classify", question="Is this issue a bug report, a feature request or a"
                 " question?", choices=CHOICES, prompt=context, timeout=600,
                 status_detail=lambda ctx: f"{len(ctx.input['text'])} characters to read"),
        compute("bug", label("bug")),
        compute("feature", label("feature")),
        compute("question", label("question")),
        notify("report", report, kind="final", status_detail="telling the session"),
    ],
    edges=[
        decision_edge("classify", {"bug": "bug", "feature": "feature", "question": "question"}),
        edge("bug", "report"), edge("feature", "report"), edge("question", "report"),
    ],
)
