"""The workflow graph as the viewer draws it, for the run detail and ``view --once``.

Owns the two calls the viewer makes to draw a run's definition snapshot
with its node states: ``graph_text`` (plain characters) and ``graph_rich``
(the same drawing with each box in its state's colour). Laying out and
drawing boxes and edges is ``views.graph``; this only says what a run
without a snapshot shows. Imports ``views.graph`` (rich only inside
``graph_rich``); never textual, so ``view --once`` stays fast.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..views.graph.layout import layout
from ..views.graph.text import render_text, render_text_rich

if TYPE_CHECKING:
    from rich.text import Text

NO_GRAPH = "(no graph: the run has no definition snapshot yet)"


def graph_text(snapshot: Mapping[str, Any] | None, states: Mapping[str, str],
               width: int = 80) -> str:
    """``snapshot`` (a run's ``workflow.json``) drawn in boxes, each with its node's state;
    one line per node when the drawing is wider than ``width``."""
    if not snapshot or not snapshot.get("nodes"):
        return NO_GRAPH
    return render_text(layout(snapshot), states, width=width).rstrip("\n")


def graph_rich(snapshot: Mapping[str, Any] | None, states: Mapping[str, str],
               width: int = 80) -> Text:
    from rich.text import Text

    if not snapshot or not snapshot.get("nodes"):
        return Text(NO_GRAPH)
    drawn = render_text_rich(layout(snapshot), states, width=width)
    drawn.rstrip()
    return drawn
