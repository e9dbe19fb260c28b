"""The workflow graph as text, for the run detail and ``view --once``.

Owns ``graph_text``: the one call the viewer makes to draw a run's
definition snapshot with its node states. Drawing boxes and edges is
``views.graph`` (``layout`` then ``render_text``); until that lands this
draws each node on its own line with its state and where its edges go, so
swapping in the real drawing changes this function's body only. Imports
nothing from the project beyond the document shapes; never textual, so
``view --once`` stays fast.
"""

from __future__ import annotations

from typing import Any

PENDING = "pending"  # a node the trace has not reached (the stream's word)


def _targets(snapshot: dict[str, Any], node_id: str) -> list[str]:
    out: list[str] = []
    for edge in snapshot.get("edges") or []:
        if edge.get("source") != node_id:
            continue
        if "target" in edge:
            out.append(str(edge["target"]))
        for case in edge.get("cases") or []:
            out.append(str(case.get("target")))
        if edge.get("default"):
            out.append(str(edge["default"]))
    return out


def graph_text(snapshot: dict[str, Any] | None, states: dict[str, str], width: int = 80) -> str:
    """``snapshot`` (a run's ``workflow.json``) drawn as text, each node with its state."""
    if not snapshot or not snapshot.get("nodes"):
        return "(no graph: the run has no definition snapshot yet)"
    lines = []
    for node in snapshot["nodes"]:
        node_id = str(node.get("id"))
        state = states.get(node_id, PENDING)
        arrow = ", ".join(dict.fromkeys(_targets(snapshot, node_id)))
        line = f"[{state:^7}] {node_id} ({node.get('kind', '?')})"
        if arrow:
            line += f" -> {arrow}"
        lines.append(line[:width])
    return "\n".join(lines)
