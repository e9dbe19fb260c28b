"""Draft a release note, wait for a human to approve it, then publish or drop it.

Shows a checkpoint with an outgoing edge. The first run ends ``waiting`` at
``approve``. ``pi-workflows answer RUN yes`` (or ``--input-json
'{"approved": false, "comment": "too long"}'``) starts a continuation run in
which the answer is the output of ``approve``; it routes past the checkpoint
to ``decide`` and on to ``publish`` or ``discard``.

Run input: the change, as the task words or ``{"change": "..."}``.
"""

from __future__ import annotations

from typing import Any

from pi_workflows import (
    NodeContext,
    action,
    checkpoint,
    compute,
    define_workflow,
    edge,
    notify,
    switch,
)

YES = {"y", "yes", "ok", "approve", "approved", "publish", "true"}


def parse_input(raw: Any) -> dict[str, str]:
    """``run review "fixed the login bug"`` gives ``{"task": "fixed the login bug"}``."""
    text = raw.get("change", raw.get("task")) if isinstance(raw, dict) else raw
    if not isinstance(text, str) or not text.strip():
        raise ValueError('describe the change: as the task words or {"change": "..."}')
    return {"change": text.strip()}


def draft(ctx: NodeContext) -> dict[str, str]:
    change = ctx.input["change"]
    return {"title": change.splitlines()[0][:72], "text": f"## Release note\n\n- {change}\n"}


def decide(ctx: NodeContext) -> dict[str, Any]:
    """Turn whatever the human answered into ``{"approved": bool, "comment": str}``."""
    answer = ctx.outputs["approve"]
    if isinstance(answer, dict):
        if isinstance(answer.get("approved"), bool):
            return {"approved": answer["approved"], "comment": str(answer.get("comment", ""))}
        answer = next((answer[k] for k in ("answer", "text", "task") if k in answer), "")
    if isinstance(answer, bool):
        return {"approved": answer, "comment": ""}
    first, _, rest = str(answer or "").strip().partition(" ")
    return {"approved": first.strip(",.!").lower() in YES, "comment": rest.strip()}


def publish(ctx: NodeContext) -> dict[str, str]:
    # Writing the same bytes again is harmless, so the action is idempotent.
    target = ctx.project_dir / "release-notes" / f"{ctx.run_id}.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(ctx.outputs["draft"]["text"])
    return {"path": str(target)}


workflow = define_workflow(
    description="Draft a release note and publish it once a human approves.",
    input=parse_input,
    start_at="draft",
    nodes=[
        compute("draft", draft),
        checkpoint("approve", summary=lambda ctx: "Publish this release note? Answer yes or no."
                   f"\n\n{ctx.outputs['draft']['text']}"),
        compute("decide", decide),
        action("publish", publish, idempotent=True, timeout=30),
        notify("published", lambda ctx: f"published {ctx.outputs['publish']['path']}",
               kind="final"),
        notify("discarded", lambda ctx: "not published"
               + (f": {ctx.outputs['decide']['comment']}" if ctx.outputs["decide"]["comment"]
                  else ""), kind="final"),
    ],
    edges=[
        edge("draft", "approve"),
        edge("approve", "decide"),
        switch("decide", "$.approved", {True: "publish", False: "discarded"}),
        edge("publish", "published"),
    ],
)
