"""Recorded runs for the viewer's tests: real workflows run to an end or a checkpoint.

``record(h)`` fills a project (the ``cli`` harness: its store and runs
directory, the CLI pointed at them) holding a completed run (a compute,
a shell step and a compute), a run waiting at a checkpoint and a failed
run, each run through the queue and ``execute_claim`` as a runner does (the
``recorded`` fixture of this folder's conftest, and the ``view`` command's
tests). A plain module: no pytest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pi_workflows.protocol.leansettings import current_settings
from pi_workflows.protocol.paths import resolve_paths
from pi_workflows.supervisor.views.stream import ViewStream

from tests.helpers.definitions import approve_flow
from tests.helpers.engine import Harness

SHIP = """
workflow = define_workflow(
    start_at="fetch",
    nodes=[
        compute("fetch", lambda ctx: {"files": ["a.txt", "b.txt"], "count": 2}),
        shell("build", "echo building; echo warn >&2"),
        compute("report", lambda ctx: {"ok": True}),
    ],
    edges=[edge("fetch", "build"), edge("build", "report")],
)
"""
BROKEN = """
def boom(ctx):
    raise RuntimeError("the build is broken")

workflow = define_workflow(
    start_at="prep",
    nodes=[compute("prep", lambda ctx: 1), compute("explode", boom)],
    edges=[edge("prep", "explode")],
)
"""


@dataclass
class Recorded:
    h: Harness
    shipped: str
    waiting: str
    broken: str

    def stream(self) -> ViewStream:
        settings = current_settings()
        return ViewStream(settings, resolve_paths(settings, self.h.project))


def record(cli: Harness) -> Recorded:
    cli.write("ship", SHIP)
    cli.write("check", approve_flow("ship it?"))
    cli.write("broken", BROKEN)
    shipped = cli.launch("ship", {})
    assert cli.execute(shipped).outcome == "completed"
    waiting = cli.launch("check", {})
    assert cli.execute(waiting).outcome == "waiting"
    broken = cli.launch("broken", {})
    assert cli.execute(broken).outcome == "failed"
    return Recorded(cli, shipped, waiting, broken)


_BOX = re.compile(r"│([^│]*)│")
_LISTED = re.compile(r"^(\S+) \((\w+)\) \[(\w+)\]")


def shown_states(graph: str) -> dict[str, str]:
    """Each node's state as a drawn graph shows it, read as a person reads it: a box's
    id with ``kind · state`` under it, or a listed node's ``id (kind) [state]``."""
    lines = graph.splitlines()
    found: dict[str, str] = {}
    for i, line in enumerate(lines):
        listed = _LISTED.match(line)
        if listed:
            found[listed.group(1)] = listed.group(3)
            continue
        below = lines[i + 1] if i + 1 < len(lines) else ""
        for box in _BOX.finditer(line):
            under = below[box.start():box.end()]
            if "·" in under and box.group(1).strip():
                found[box.group(1).strip()] = under.strip("│ ").split("·")[1].strip()
    return found
