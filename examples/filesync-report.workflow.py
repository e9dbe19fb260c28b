"""Report a file the ``filesync`` controller wrote: its size and first line.

Started by the controller (``ctx.workflows.ensure``) after each change, with
input ``{"path": ..., "generation": N}``; an ordinary run in every view.
"""

from __future__ import annotations

from typing import Any

from pi_workflows import NodeContext, compute, define_workflow


def parse_input(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict) or not isinstance(raw.get("path"), str):
        raise ValueError('give {"path": "<file>", "generation": N}')
    return {"path": raw["path"], "generation": int(raw.get("generation", 0))}


def report(ctx: NodeContext) -> dict[str, Any]:
    text = (ctx.project_dir / ctx.input["path"]).read_text()
    return {"path": ctx.input["path"], "generation": ctx.input["generation"],
            "bytes": len(text.encode()), "first_line": text.splitlines()[0] if text else ""}


workflow = define_workflow(start_at="report", nodes=[compute("report", report)],
                           input=parse_input,
                           description="Report a file the filesync controller wrote.")
