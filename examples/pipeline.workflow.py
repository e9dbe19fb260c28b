"""Count the lines of Python under a directory and report the total.

Shows compute and shell nodes, and a switch on ``$result.outcome`` that routes
a failed command to its own report instead of failing the run.

Run input: a directory of the project as the task words (``pi-workflows run
pipeline src``) or ``--input-json '{"dir": "src"}'``; default ``.``, relative
to the project directory. A directory the project does not have fails the
run at its first step, saying so.
"""

from __future__ import annotations

from typing import Any

from pi_workflows import NodeContext, compute, define_workflow, edge, notify, shell, switch


def parse_input(raw: Any) -> dict[str, str]:
    """``run pipeline src`` gives ``{"task": "src"}``; JSON input may be ``{"dir": ...}``."""
    if isinstance(raw, str):
        raw = {"dir": raw}
    if not isinstance(raw, dict):
        raise ValueError('give a directory as the task, or --input-json \'{"dir": "<path>"}\'')
    value = raw.get("dir", raw.get("task", "."))
    if not isinstance(value, str):
        raise TypeError("the directory must be a string")
    return {"dir": value.strip() or "."}


def plan(ctx: NodeContext) -> dict[str, str]:
    directory = ctx.input["dir"]
    if not (ctx.project_dir / directory).is_dir():
        # Counting in a directory that is not there would "succeed" with nothing to say.
        raise ValueError(f"no directory {directory!r} in the project {ctx.project_dir}:"
                         " give one it has, such as `pi-workflows run pipeline .`")
    return {"dir": directory, "pattern": "*.py"}


def count_command(ctx: NodeContext) -> list[str]:
    pattern = ctx.outputs["plan"]["pattern"]
    # argv form: the pattern reaches the script as $1, never through shell parsing.
    script = 'find . -type f -name "$1" -exec cat {} + | wc -l'
    return ["/bin/sh", "-c", script, "count", pattern]


def summarize(ctx: NodeContext) -> dict[str, Any]:
    stdout = ctx.outputs["count"]["stdout"].strip()
    return {"dir": ctx.outputs["plan"]["dir"], "lines": int(stdout or 0)}


def failure_message(ctx: NodeContext) -> str:
    result = ctx.results["count"]
    return f"counting failed ({result['outcome']}, {result['errorCode']}): {result['error']}"


workflow = define_workflow(
    description="Count the lines of Python under a directory.",
    input=parse_input,
    start_at="plan",
    nodes=[
        compute("plan", plan),
        shell("count", count_command,
              cwd=lambda ctx: ctx.project_dir / ctx.outputs["plan"]["dir"],
              timeout=120, idempotent=True),
        compute("summarize", summarize),
        notify("report", lambda ctx: "{lines} lines of Python under {dir}".format(
            **ctx.outputs["summarize"]), kind="final"),
        notify("report_failure", failure_message, kind="final"),
    ],
    edges=[
        edge("plan", "count"),
        switch("count", "$result.outcome", {"ok": "summarize"}, default="report_failure"),
        edge("summarize", "report"),
    ],
)
