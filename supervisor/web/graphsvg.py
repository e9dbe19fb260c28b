"""The run graph as SVG, for the run page.

Owns ``graph_svg(snapshot, states, selected)``: the workflow's definition
snapshot (``workflow.json``) drawn by ``views.graph`` (the layout the
``graph`` command uses), or as boxes in a column when it cannot be laid
out; each node a ``<g class="node state-<state>" data-node="<id>">`` that the
page's script recolours and the inspector selects. Every text is escaped.
Imports ``views.graph``; never ``cli``, ``host`` or another
sibling.
"""

from __future__ import annotations

from html import escape
from typing import Any

from ..views.graph.layout import layout
from ..views.graph.svg import render_svg

BOX_W, BOX_H, GAP = 200, 36, 28


def _order(snapshot: dict[str, Any]) -> list[str]:
    """Node ids breadth first from ``startAt``, then any the edges never reach."""
    nodes = [str(n.get("id")) for n in snapshot.get("nodes") or [] if isinstance(n, dict)]
    targets: dict[str, list[str]] = {}
    for edge in snapshot.get("edges") or []:
        if not isinstance(edge, dict):
            continue
        outs = [edge.get("target")] + [c.get("target") for c in edge.get("cases") or []
                                       if isinstance(c, dict)] + [edge.get("default")]
        targets.setdefault(str(edge.get("source")), []).extend(
            str(t) for t in outs if isinstance(t, str))
    order: list[str] = []
    todo = [str(snapshot.get("startAt"))]
    while todo:
        node = todo.pop(0)
        if node in nodes and node not in order:
            order.append(node)
            todo.extend(targets.get(node, []))
    return order + [n for n in nodes if n not in order]


def graph_svg(snapshot: dict[str, Any] | None, states: dict[str, str],
              selected: str | None = None) -> str:
    if not isinstance(snapshot, dict) or not snapshot.get("nodes"):
        return '<p class="muted">no graph (the run has no definition snapshot yet)</p>'
    try:
        return render_svg(layout(snapshot), states, selected=selected)
    except Exception:  # a snapshot the layout cannot place still gets a picture
        return column_svg(snapshot, states, selected)


def column_svg(snapshot: dict[str, Any], states: dict[str, str],
               selected: str | None = None) -> str:
    """The fallback: the nodes in one column, breadth first."""
    order = _order(snapshot)
    kinds = {str(n.get("id")): str(n.get("kind", "")) for n in snapshot["nodes"]
             if isinstance(n, dict)}
    pos = {node: i for i, node in enumerate(order)}
    height = len(order) * (BOX_H + GAP) + GAP
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" width="{BOX_W + 80}"'
             f' height="{height}" viewBox="0 0 {BOX_W + 80} {height}" role="img"'
             ' aria-label="the workflow graph">']
    for edge in snapshot.get("edges") or []:
        if not isinstance(edge, dict):
            continue
        source = str(edge.get("source"))
        outs = [edge.get("target"), *[c.get("target") for c in edge.get("cases") or []
                                       if isinstance(c, dict)], edge.get("default")]
        for target in {str(t) for t in outs if isinstance(t, str)}:
            if source not in pos or target not in pos:
                continue
            y1 = GAP + pos[source] * (BOX_H + GAP) + BOX_H
            y2 = GAP + pos[target] * (BOX_H + GAP)
            if y2 > y1:
                parts.append(f'<line class="edge" x1="{40 + BOX_W // 2}" y1="{y1}"'
                             f' x2="{40 + BOX_W // 2}" y2="{y2}"/>')
            else:  # a loop back: drawn on the right
                parts.append(f'<path class="edge back" d="M {40 + BOX_W} {y1 - BOX_H // 2}'
                             f' C {BOX_W + 76} {y1}, {BOX_W + 76} {y2}, {40 + BOX_W}'
                             f' {y2 + BOX_H // 2}"/>')
    for node in order:
        y = GAP + pos[node] * (BOX_H + GAP)
        state = states.get(node, "pending")
        cls = f"node state-{escape(state)}" + (" selected" if node == selected else "")
        parts.append(f'<g class="{cls}" data-node="{escape(node)}" tabindex="0">'
                     f'<rect x="40" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6"/>'
                     f'<text x="{40 + BOX_W // 2}" y="{y + 23}">{escape(node)}'
                     f'<tspan class="kind"> {escape(kinds.get(node, ""))}</tspan></text></g>')
    parts.append("</svg>")
    return "".join(parts)
