"""Ask a Pi agent to summarize a file or a text, with a checked output shape.

Shows an agent step with ``expected_output`` (checked by the engine before
the submission is accepted) and ``validate`` (a rule of our own: the model
sees the returned reason and can submit again).

Run input: a path to a file in the project or a text, as the task words, or
``{"path": "..."}`` / ``{"text": "..."}``.
"""

from __future__ import annotations

from typing import Any

from pi_workflows import NodeContext, agent, define_workflow, edge, notify

MAX_BULLETS = 5
MAX_SUMMARY_CHARS = 600

SUMMARY_SHAPE = {
    "type": "object",
    "required": ["summary", "bullets"],
    "properties": {
        "summary": {"type": "string"},
        "bullets": {"type": "array", "items": {"type": "string"}},
    },
}


def parse_input(raw: Any) -> dict[str, str]:
    """A path or text as the task words, or ``{"path": ...}`` / ``{"text": ...}``."""
    if isinstance(raw, dict) and "task" in raw:
        raw = raw["task"]
    if isinstance(raw, dict):
        for key in ("path", "text"):
            if isinstance(raw.get(key), str) and raw[key].strip():
                return {key: raw[key].strip()}
        raise ValueError('give {"path": "<file>"} or {"text": "<text>"}')
    if isinstance(raw, str) and raw.strip():
        text = raw.strip()
        looks_like_path = "\n" not in text and " " not in text and "." in text
        return {"path": text} if looks_like_path else {"text": text}
    raise ValueError("give a file path or a text to summarize")


def prompt(ctx: NodeContext) -> str:
    source = ctx.input
    what = (f"the file {source['path']} (read it first)" if "path" in source
            else f"this text:\n\n{source['text']}")
    return (f"Summarize {what}\n\nGive a summary of at most {MAX_SUMMARY_CHARS} characters"
            f" and at most {MAX_BULLETS} short bullet points.")


def check(output: Any, ctx: NodeContext) -> str | None:
    summary, bullets = output["summary"].strip(), output["bullets"]
    if not summary:
        return "the summary is empty"
    if len(summary) > MAX_SUMMARY_CHARS:
        return f"the summary has {len(summary)} characters; keep it under {MAX_SUMMARY_CHARS}"
    if len(bullets) > MAX_BULLETS:
        return f"give at most {MAX_BULLETS} bullets, not {len(bullets)}"
    if any(not b.strip() for b in bullets):
        return "a bullet is empty"
    return None


def report(ctx: NodeContext) -> str:
    result = ctx.outputs["summarize"]
    return "\n".join([result["summary"], *(f"- {b}" for b in result["bullets"])])


workflow = define_workflow(
    description="Summarize a file or a text with a Pi agent.",
    input=parse_input,
    start_at="summarize",
    nodes=[
        agent("summarize", prompt, expected_output=SUMMARY_SHAPE, validate=check,
              timeout=600),
        notify("report", report, kind="final"),
    ],
    edges=[edge("summarize", "report")],
)
