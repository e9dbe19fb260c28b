"""Score a draft and approve or reject it: a workflow made to be included.

Shows ``exits=``: the two ends of this workflow are named, ``approved`` and
``rejected``, so a workflow that includes it (see ``compose.workflow.py``)
routes on ``"review.approved"`` and ``"review.rejected"``. It also runs on
its own: ``pi-workflows run review-step "a short draft"``.

Run input: the draft, as the task words or ``{"text": "..."}``.
"""

from __future__ import annotations

from typing import Any

from pi_workflows import NodeContext, compute, define_workflow, switch

MIN_WORDS = 5


def parse_input(raw: Any) -> dict[str, str]:
    """``run review-step words...`` gives ``{"task": ...}``; an include gives ``{"text": ...}``."""
    if isinstance(raw, str):
        raw = {"text": raw}
    if not isinstance(raw, dict):
        raise ValueError('give the draft as the task, or --input-json \'{"text": "..."}\'')
    text = raw.get("text", raw.get("task", ""))
    if not isinstance(text, str):
        raise TypeError("the draft must be a string")
    return {"text": text.strip()}


def score(ctx: NodeContext) -> dict[str, Any]:
    words = len(ctx.input["text"].split())
    return {"words": words, "verdict": "good" if words >= MIN_WORDS else "short"}


def approve(ctx: NodeContext) -> dict[str, Any]:
    return {"text": ctx.input["text"], "words": ctx.outputs["score"]["words"]}


def reject(ctx: NodeContext) -> dict[str, Any]:
    words = ctx.outputs["score"]["words"]
    return {"reason": f"{words} words; a draft needs at least {MIN_WORDS}"}


workflow = define_workflow(
    description="Score a draft and approve or reject it (made to be included).",
    input=parse_input,
    start_at="score",
    nodes=[compute("score", score), compute("approve", approve), compute("reject", reject)],
    edges=[switch("score", "$.verdict", {"good": "approve"}, default="reject")],
    exits={"approved": "approve", "rejected": "reject"},
    max_steps=10,
)
