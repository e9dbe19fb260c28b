"""Draft a release note, then ask the release manager: publish, drop or revise it.

Shows a human decision: a checkpoint whose waiting run carries a typed
request (the question, who should answer, the valid answers), two choices
and a text input, routed exhaustively with ``human_decision_edge``, and
``on_timeout``: unanswered for ``wait_s`` seconds (a day by default), the
host answers ``drop`` itself. ``pi-workflows status RUN`` shows the
question and the answers; any other answer is refused and nothing changes.

    pi-workflows run approve fixed the login bug --detach
    pi-workflows answer RUN publish
    pi-workflows answer RUN revise mention the new error page

Run input: the change, as the task words or ``{"change": "...", "wait_s": N}``.
"""

from __future__ import annotations

from typing import Any

from pi_workflows import (
    NodeContext,
    action,
    choice,
    compute,
    define_workflow,
    edge,
    human_decision,
    human_decision_edge,
    notify,
    text_input,
)

DAY_S = 86_400


def parse_input(raw: Any) -> dict[str, Any]:
    """``run approve "fixed the login bug"`` gives ``{"change": ..., "wait_s": 86400}``."""
    text = raw.get("change", raw.get("task")) if isinstance(raw, dict) else raw
    if not isinstance(text, str) or not text.strip():
        raise ValueError('describe the change: as the task words or {"change": "..."}')
    wait = raw.get("wait_s", DAY_S) if isinstance(raw, dict) else DAY_S
    if isinstance(wait, bool) or not isinstance(wait, int | float) or wait <= 0:
        raise ValueError("wait_s must be a positive number of seconds")
    return {"change": text.strip(), "wait_s": wait}


def draft(ctx: NodeContext) -> dict[str, str]:
    return {"text": f"## Release note\n\n- {ctx.input['change']}\n"}


def publish(ctx: NodeContext) -> dict[str, str]:
    # Writing the same bytes again is harmless, so the action is idempotent.
    target = ctx.project_dir / "release-notes" / f"{ctx.run_id}.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(ctx.outputs["draft"]["text"])
    return {"path": str(target)}


workflow = define_workflow(
    description="Draft a release note; the release manager publishes, drops or revises it.",
    input=parse_input,
    start_at="draft",
    nodes=[
        compute("draft", draft),
        human_decision(
            "review",
            question=lambda ctx: f"Publish this release note?\n\n{ctx.outputs['draft']['text']}",
            audience="the release manager",
            choices=[
                choice("publish", description="publish the note as it is"),
                choice("drop", description="do not publish it"),
                text_input("revise", "what should change in the note", min_length=3,
                           max_length=500),
            ],
            on_timeout="drop",
            timeout=lambda ctx: ctx.input["wait_s"],
        ),
        action("publish", publish, idempotent=True, timeout=30),
        notify("published", lambda ctx: f"published {ctx.outputs['publish']['path']}",
               kind="final"),
        notify("dropped", lambda ctx: "not published"
               + (" (nobody answered in time)" if ctx.outputs["review"]["by"] == "timeout"
                  else ""), kind="final"),
        notify("revision", lambda ctx: f"to revise: {ctx.outputs['review']['text']}",
               kind="final"),
    ],
    edges=[
        edge("draft", "review"),
        human_decision_edge("review", {"publish": "publish", "drop": "dropped",
                                       "revise": "revision"}),
        edge("publish", "published"),
    ],
)
