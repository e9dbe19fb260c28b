"""Process a batch of items in a shell loop, with a progress bar while it runs.

Shows ``shell(..., updates=parse_line(fn))``: each ``processed 3/10 items``
line the command prints becomes the update
``{"progress": {"done": 3, "total": 10, "unit": "items"}}``, which the live
view of ``pi-workflows run`` draws as a bar with the time left, and
``watch``, ``logs`` and the Pi widget show as ``3/10 items (30%)``; and
``shell(..., parse=fn)``, which shapes the node's output from the command's
result (``{exitCode, stdout, stderr, truncated}``) instead of passing the raw
text on.

Run input: how many items, as the task words (``pi-workflows run progress
12``) or ``--input-json '{"items": 12}'``; default 10, at most 200. Each item
takes ``PROGRESS_STEP_S`` seconds (default 0.5) of the command's time.
"""

from __future__ import annotations

import re
from typing import Any

from pi_workflows import NodeContext, define_workflow, edge, notify, parse_line, shell

LINE = re.compile(r"^processed (\d+)/(\d+) items(?: \((.*)\))?$")
MAX_ITEMS = 200


def parse_input(raw: Any) -> dict[str, int]:
    """``run progress 12`` gives ``{"task": "12"}``; JSON input may be ``{"items": 12}``."""
    value = raw.get("items", raw.get("task", 10)) if isinstance(raw, dict) else raw
    try:
        items = int(str(value).strip() or 10)
    except ValueError:
        raise ValueError(f"give the number of items as the task, such as"
                         f" `pi-workflows run progress 12`, not {str(value)[:40]!r}") from None
    if not 1 <= items <= MAX_ITEMS:
        raise ValueError(f"the number of items must be 1 to {MAX_ITEMS}, got {items}")
    return {"items": items}


def command(ctx: NodeContext) -> list[str]:
    # The items are the run's input; the loop stands in for real work on each.
    script = ('n="$1"; i=0; while [ "$i" -lt "$n" ]; do i=$((i + 1));'
              ' sleep "${PROGRESS_STEP_S:-0.5}"; echo "processed $i/$n items (item-$i)";'
              " done; echo finished")
    return ["/bin/sh", "-c", script, "progress", str(ctx.input["items"])]


def progress_line(line: str) -> dict[str, Any] | None:
    """``processed 3/10 items (item-3)`` -> a progress update; any other line: none."""
    found = LINE.match(line)
    if found is None:
        return None
    done, total, name = found.groups()
    update: dict[str, Any] = {"progress": {"done": int(done), "total": int(total),
                                           "unit": "items"}}
    if name:
        update["message"] = f"last: {name}"
    return update


def summarize(result: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
    """The node's output: how many items were processed, not the command's raw text."""
    lines = result["stdout"].splitlines()
    processed = sum(1 for line in lines if LINE.match(line))
    return {"processed": processed, "finished": bool(lines) and lines[-1] == "finished"}


workflow = define_workflow(
    name="progress",
    description="Process a batch of items in a shell loop, with a progress bar while it runs",
    input=parse_input,
    start_at="process",
    nodes=[
        shell("process", command, updates=parse_line(progress_line), parse=summarize,
              timeout=600),
        notify("report", lambda ctx: f"processed {ctx.outputs['process']['processed']} items",
               kind="final"),
    ],
    edges=[edge("process", "report")],
)
