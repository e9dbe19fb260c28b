"""The run graph as SVG, for the run page.

Owns ``graph_svg(snapshot, states, selected)``: the workflow's definition
snapshot (``workflow.json``) drawn by ``views.graph`` (the layout the
``graph`` command uses; a damaged snapshot gets a line naming its nodes);
each node a ``<g class="node state-<state>" data-node="<id>">`` that the
page's script recolours and the inspector selects. Every text is escaped.
Imports ``views.graph``; never ``cli``, ``host`` or another
sibling.
"""

from __future__ import annotations

from html import escape
from typing import Any

from ..views.graph.layout import layout
from ..views.graph.svg import render_svg


def graph_svg(snapshot: dict[str, Any] | None, states: dict[str, str],
              selected: str | None = None) -> str:
    if not isinstance(snapshot, dict) or not snapshot.get("nodes"):
        return '<p class="muted">no graph (the run has no definition snapshot yet)</p>'
    try:
        return render_svg(layout(snapshot), states, selected=selected)
    except Exception:  # a damaged snapshot: the page still shows the run
        ids = ", ".join(escape(str(n.get("id"))) for n in snapshot["nodes"]
                        if isinstance(n, dict))
        return f'<p class="muted">the graph could not be drawn; its nodes: {ids}</p>'
