"""A snapshot as Graphviz DOT, for people who lay graphs out with ``dot`` themselves.

Owns ``render_dot``: one quoted, escaped node per workflow node (its id and
kind, filled by its state when given), one edge per edge with its case as the
label, each include a ``cluster`` subgraph. Imports ``views.graph.layout``
(the snapshot's nodes and edges read one way); never another wing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .layout import edge_specs, groups_of, node_list

FILLS = {"done": "#e6f4ea", "running": "#e8f0fe", "failed": "#fce8e6",
         "waiting": "#fef7e0", "pending": "#f1f3f4", "skipped": "#ffffff"}


def quote(text: str) -> str:
    """A DOT string: quoted, with quotes, backslashes and line breaks escaped."""
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    text = text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")
    return f'"{text}"'


def render_dot(snapshot: Mapping[str, Any], states: Mapping[str, str] | None = None) -> str:
    """The DOT text of the snapshot's graph (``states``: node id -> state word)."""
    nodes = node_list(snapshot)
    group = groups_of(nodes)
    name = snapshot.get("name") if isinstance(snapshot.get("name"), str) else "workflow"
    lines = [f"digraph {quote(str(name))} {{", "  rankdir=TB;",
             '  node [shape=box, style="rounded,filled", fillcolor="#ffffff",'
             ' fontname="monospace"];', '  edge [fontname="monospace"];']
    start = snapshot.get("startAt")

    def node_line(node: dict[str, Any], indent: str) -> str:
        node_id, kind = node["id"], str(node.get("kind") or "")
        label = f"{node_id}\n{kind}"
        attrs = []
        if states is not None:
            state = states.get(node_id, "pending")
            label += f" · {state}"
            fill = FILLS.get(state)
            if fill:
                attrs.append(f'fillcolor="{fill}"')
        if node_id == start:
            attrs.append("penwidth=2")
        attrs.insert(0, f"label={quote(label)}")
        return f"{indent}{quote(node_id)} [{', '.join(attrs)}];"

    clusters: dict[str, list[dict[str, Any]]] = {}
    for node in nodes:
        g = group[node["id"]]
        if g is None:
            lines.append(node_line(node, "  "))
        else:
            clusters.setdefault(g, []).append(node)
    for i, (label, members) in enumerate(sorted(clusters.items())):
        lines.append(f"  subgraph {quote(f'cluster_{i}')} {{")
        lines.append(f'    label={quote(label)}; style="dashed,rounded";')
        lines += [node_line(node, "    ") for node in members]
        lines.append("  }")
    for spec in edge_specs(snapshot):
        attrs = f" [label={quote(spec.label)}]" if spec.label else ""
        lines.append(f"  {quote(spec.source)} -> {quote(spec.target)}{attrs};")
    lines.append("}")
    return "\n".join(lines) + "\n"
