"""A layout as a standalone SVG document: the same cells as the text drawing, scaled.

Owns ``render_svg``: each node a ``<g class="node state-STATE" data-node=ID>``
(a rect, its id and kind, a tooltip), each edge a ``<path class="edge">``
ending in an arrow marker with its case label beside it, each include a
dashed frame with its mount path, and an embedded ``<style>`` colouring the
states (a page's own CSS can animate ``.state-running``). No scripts, no
external references; every text escaped for XML; the same layout and states
always give the same bytes. Imports ``views.graph.layout``; never another wing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .layout import Box, Layout

CW, CH = 8, 14  # pixels per cell: a 12 px monospace character and its line
STYLE = """
svg.pi-graph { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.background { fill: #ffffff; }
.node rect { fill: #ffffff; stroke: #5f6368; stroke-width: 1.5; }
.node .id { font-size: 12px; font-weight: 600; fill: #202124; }
.node .kind { font-size: 11px; fill: #5f6368; }
.state-pending rect { fill: #f1f3f4; stroke: #9aa0a6; }
.state-done rect { fill: #e6f4ea; stroke: #1e8e3e; }
.state-running rect { fill: #e8f0fe; stroke: #1a73e8; stroke-width: 2.5; }
.state-failed rect { fill: #fce8e6; stroke: #d93025; stroke-width: 2; }
.state-waiting rect { fill: #fef7e0; stroke: #f29900; stroke-width: 2; }
.state-skipped rect { fill: #ffffff; stroke: #dadce0; stroke-dasharray: 4 3; }
.state-skipped text { fill: #9aa0a6; }
.node.selected rect { stroke: #202124; stroke-width: 3; }
.edge { fill: none; stroke: #5f6368; stroke-width: 1.5; }
.edge.back { stroke-dasharray: 6 3; }
.arrowhead { fill: #5f6368; }
.edge-label { font-size: 11px; fill: #3c4043; }
.group rect { fill: #f8f9fa; stroke: #9aa0a6; stroke-dasharray: 3 3; }
.group text { font-size: 11px; fill: #5f6368; font-style: italic; }
""".strip()
# Characters XML 1.0 cannot carry at all: replaced, so the document always parses.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_CLASS_UNSAFE = re.compile(r"[^a-z0-9_-]+")


def esc(text: str) -> str:
    """Text or an attribute value, escaped for XML (quotes included)."""
    text = _NOT_XML.sub("\ufffd", text)
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#39;"))


def state_class(state: str) -> str:
    """``state-WORD`` with the word made safe as a class name."""
    return "state-" + (_CLASS_UNSAFE.sub("-", state.lower()).strip("-") or "unknown")


def _px(x: int, y: int) -> tuple[int, int]:
    return x * CW + CW // 2, y * CH + CH // 2


def _node(box: Box, states: Mapping[str, str] | None, selected: str | None) -> str:
    classes = ["node"]
    state = None if states is None else states.get(box.id, "pending")
    if state is not None:
        classes.append(state_class(state))
    if box.id == selected:
        classes.append("selected")
    left, top = _px(box.x, box.y)
    right, bottom = _px(box.x + box.w - 1, box.y + box.h - 1)
    mid = (left + right) // 2
    second = box.kind if state is None else f"{box.kind} · {state}"
    tip = f"{box.id} ({box.kind})" + ("" if state is None else f": {state}")
    return (f'<g class="{" ".join(classes)}" data-node="{esc(box.id)}">'
            f"<title>{esc(tip)}</title>"
            f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}"'
            ' rx="6" ry="6"/>'
            f'<text class="id" x="{mid}" y="{_px(0, box.y + 1)[1]}" text-anchor="middle"'
            f' dominant-baseline="central">{esc(box.id)}</text>'
            f'<text class="kind" x="{mid}" y="{_px(0, box.y + 2)[1]}" text-anchor="middle"'
            f' dominant-baseline="central">{esc(second)}</text></g>')


def render_svg(layout: Layout, states: Mapping[str, str] | None = None, *,
               selected: str | None = None) -> str:
    """The whole SVG document (see the module docstring)."""
    width, height = layout.width * CW, layout.height * CH
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="pi-graph" width="{width}"'
           f' height="{height}" viewBox="0 0 {width} {height}" role="img"'
           f' aria-label="{esc("workflow " + layout.name)}">',
           f"<title>{esc(layout.name or 'workflow')}</title>",
           f"<style>{esc_style(STYLE)}</style>",
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8"'
           ' markerHeight="8" orient="auto-start-reverse"><path class="arrowhead"'
           ' d="M0,0 L10,5 L0,10 z"/></marker></defs>',
           f'<rect class="background" x="0" y="0" width="{width}" height="{height}"/>']
    for group in layout.groups:
        gx, gy = group.x * CW, group.y * CH
        out.append(f'<g class="group" data-group="{esc(group.label)}">'
                   f'<rect x="{gx}" y="{gy}" width="{group.w * CW}" height="{group.h * CH}"'
                   ' rx="8" ry="8"/>'
                   f'<text x="{gx + 6}" y="{gy + 12}">{esc(group.label)}</text></g>')
    boxes = {b.id: b for b in layout.boxes}
    for edge in layout.edges:
        points = [_px(px, py) for px, py in edge.points]
        # From the source's border to the target's: the arrow's tip touches the box.
        points[0] = (points[0][0], points[0][1] - CH)
        points[-1] = (points[-1][0], _px(0, boxes[edge.target].y)[1])
        d = " ".join(("M" if i == 0 else "L") + f"{x},{y}" for i, (x, y) in enumerate(points))
        cls = "edge back" if edge.back else "edge"
        label = ""
        if edge.label and edge.label_at is not None:
            lx, ly = _px(*edge.label_at)
            label = (f'<text class="edge-label" x="{lx - CW // 2 + 2}" y="{ly}"'
                     f' dominant-baseline="central">{esc(edge.label)}</text>')
        out.append(f'<g class="link" data-source="{esc(edge.source)}"'
                   f' data-target="{esc(edge.target)}"><path class="{cls}" d="{d}"'
                   f' marker-end="url(#arrow)"/>{label}</g>')
    out += [_node(box, states, selected) for box in layout.boxes]
    out.append("</svg>")
    return "\n".join(out) + "\n"


def esc_style(css: str) -> str:
    """The style sheet has no ``<`` or ``&``; escaped all the same, should it gain one."""
    return css.replace("&", "&amp;").replace("<", "&lt;")
