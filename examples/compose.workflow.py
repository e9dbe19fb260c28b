"""Draft a note, have it reviewed by an included workflow, then publish or revise it.

Shows ``include``: ``review-step.workflow.py`` (beside this file) runs as the
node ``review``; its nodes run as ``review/score``, ``review/approve`` and so
on, each seeing only its own workflow (``ctx.input`` is the child's input,
``ctx.outputs`` keyed by its own node ids). This workflow routes on the
child's two exits differently: ``review.approved`` goes on to ``publish``,
and ``review.rejected`` to ``revise``, which reads the reason from the exit's
value (every exit gives ``{"exit": name, "output": <its node's output>}``;
``included_result`` checks that shape).

Run input: the note, as the task words or ``{"text": "..."}``:
``pi-workflows run compose "ship the new parser on monday morning"``.
"""

from __future__ import annotations

from typing import Any

from pi_workflows import (
    NodeContext,
    compute,
    define_workflow,
    edge,
    include,
    included_result,
    notify,
)


def parse_input(raw: Any) -> dict[str, str]:
    if isinstance(raw, str):
        raw = {"text": raw}
    if not isinstance(raw, dict):
        raise ValueError('give the note as the task, or --input-json \'{"text": "..."}\'')
    text = raw.get("text", raw.get("task", ""))
    if not isinstance(text, str):
        raise TypeError("the note must be a string")
    return {"text": text}


def draft(ctx: NodeContext) -> dict[str, str]:
    return {"text": " ".join(ctx.input["text"].split())}


REVIEW_EXITS = ("approved", "rejected")


def publish(ctx: NodeContext) -> dict[str, Any]:
    # The child is included by path, so its exits are named here to check the shape.
    result = included_result(REVIEW_EXITS, ctx.outputs["review.approved"])
    return {"published": result["output"]["text"], "words": result["output"]["words"]}


def revise(ctx: NodeContext) -> dict[str, Any]:
    result = ctx.outputs["review.rejected"]
    return {"revise": True, "why": result["output"]["reason"], "exit": result["exit"]}


workflow = define_workflow(
    description="Draft a note, review it with an included workflow, publish or revise it.",
    input=parse_input,
    start_at="draft",
    nodes=[
        compute("draft", draft),
        include("review-step.workflow.py", input=lambda ctx: ctx.outputs["draft"], as_="review"),
        compute("publish", publish),
        compute("revise", revise),
        notify("told", lambda ctx: "needs another pass: " + ctx.outputs["revise"]["why"],
               kind="final"),
    ],
    edges=[
        edge("draft", "review"),
        edge("review.approved", "publish"),
        edge("review.rejected", "revise"),
        edge("revise", "told"),
    ],
)
