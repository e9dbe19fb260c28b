"""Count the TODO and FIXME lines of a project; the session's model then presents the count.

Shows ``presentation_prompt``: when a run of a Pi session (started from Pi,
or with ``run --session``) ends, the session's model is asked for one turn
about the result, with the text this function builds from the run's final
state. Started from a plain terminal, the run just completes.

    pi-workflows run todos src --session SESSION
    (or, in Pi: "run the todos workflow on src")

Also shows ``shell(..., parse=fn)``: the command's raw ``grep -c`` lines
become ``{"total", "files", "top"}``.

Run input: the directory to search, as the task words; default the project.
"""

from __future__ import annotations

from typing import Any

from pi_workflows import NodeContext, define_workflow, shell

SKIP = (".git", ".pi", "node_modules", ".venv", "__pycache__")


def parse_input(raw: Any) -> dict[str, str]:
    value = raw.get("dir", raw.get("task")) if isinstance(raw, dict) else raw
    text = str(value).strip() if value is not None else ""
    return {"dir": text or "."}


def command(ctx: NodeContext) -> list[str]:
    # An argv list: the directory never passes through shell parsing.
    return ["grep", "-rIcE", r"\b(TODO|FIXME)\b", *(f"--exclude-dir={d}" for d in SKIP),
            "--", ctx.input["dir"]]


def count(result: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
    """``grep -c`` prints ``path:N`` per file; exit 1 means no match, 2 an error."""
    if result["exitCode"] not in (0, 1):
        raise ValueError(f"grep could not search {ctx.input['dir']!r}: "
                         + (result["stderr"].strip().splitlines() or ["no reason given"])[0])
    per_file: dict[str, int] = {}
    for line in result["stdout"].splitlines():
        path, _, number = line.rpartition(":")
        if path and number.isdigit() and int(number) > 0:
            per_file[path] = int(number)
    top = sorted(per_file.items(), key=lambda item: (-item[1], item[0]))[:3]
    return {"dir": ctx.input["dir"], "total": sum(per_file.values()), "files": len(per_file),
            "top": [{"path": path, "lines": lines} for path, lines in top]}


def present(state: dict[str, Any]) -> str:
    """The turn's prompt; the run's outputs reach the model beside it as data."""
    found = state["outputs"]["count"]
    if not found["total"]:
        return f"Tell the user in one sentence that {found['dir']} has no TODO or FIXME lines."
    return (f"Tell the user in two or three sentences what was found in {found['dir']}:"
            f" {found['total']} TODO or FIXME lines in {found['files']} files. Name the"
            " files with the most, from the run's data, and offer to open the first one.")


workflow = define_workflow(
    description="Count the TODO and FIXME lines of a project; the session's model presents it.",
    input=parse_input,
    start_at="count",
    nodes=[shell("count", command, parse=count, allow_nonzero_exit=True, timeout=120)],
    presentation_prompt=present,
)
