"""Check a project in parallel: a few commands run as one command batch.

Shows ``run_command_batch`` from an action: three checks run at most two at a
time, each with its own timeout and bounded output, and the results (in the
order the checks are listed) become one report. A check that fails or times
out is reported, not fatal. The action says it is ``idempotent`` (it only
reads), so a run killed mid-batch simply runs the batch again on resume.

Run input: none (``pi-workflows run batch``).
"""

from __future__ import annotations

import sys
from typing import Any

from pi_workflows import NodeContext, action, define_workflow, edge, notify, run_command_batch

CHECKS: dict[str, Any] = {
    "python": [sys.executable, "--version"],
    "files": "find . -name '*.py' -not -path './.*' | wc -l",
    "todo": {"command": "grep -rIl TODO --exclude-dir='.?*' . | wc -l", "timeout": 20},
}


def run_checks(ctx: NodeContext) -> list[dict[str, Any]]:
    results = run_command_batch(list(CHECKS.values()), concurrency=2, timeout=30,
                                max_output_bytes=4096)
    # A list keeps the checks' order (a JSON object's keys are stored sorted).
    return [{"check": name, "status": r["status"],
             "output": r["stdout"].strip() or r["stderr"].strip()}
            for name, r in zip(CHECKS, results, strict=True)]


def report(ctx: NodeContext) -> str:
    return "\n".join(f"{c['check']}: {c['output']}" if c["status"] == "succeeded"
                     else f"{c['check']}: {c['status']}" for c in ctx.outputs["checks"])


workflow = define_workflow(
    description="Run a few project checks at once with a command batch.",
    start_at="checks",
    nodes=[
        action("checks", run_checks, idempotent=True, timeout=120),
        notify("report", report, kind="final"),
    ],
    edges=[edge("checks", "report")],
)
