"""A layout drawn in a terminal's characters: boxes, lines and arrows, top to bottom.

Owns ``render_text`` (plain text, no ANSI codes: boxes in box-drawing
characters, each with its node id and kind, and its state when given; edges
as lines that join where they meet, an arrow over each target, a switch
edge's case beside it), ``render_list`` (the fallback when the drawing is
wider than the terminal: one line per node with its successors) and
``render_text_rich`` (the same drawing as a rich ``Text``, each box coloured
by its state, for the terminal viewer). Imports ``views.graph.layout`` and
rich (only in ``render_text_rich``); never another wing.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .layout import Box, Layout

if TYPE_CHECKING:
    from rich.text import Text

UP, DOWN, LEFT, RIGHT = 1, 2, 4, 8
LINES = {
    UP | DOWN: "│", LEFT | RIGHT: "─", UP: "│", DOWN: "│", LEFT: "─", RIGHT: "─",
    DOWN | RIGHT: "┌", DOWN | LEFT: "┐", UP | RIGHT: "└", UP | LEFT: "┘",
    UP | DOWN | RIGHT: "├", UP | DOWN | LEFT: "┤", DOWN | LEFT | RIGHT: "┬",
    UP | LEFT | RIGHT: "┴", UP | DOWN | LEFT | RIGHT: "┼",
}
ARROWS = {DOWN: "▼", UP: "▲", LEFT: "◀", RIGHT: "▶"}
# The terminal viewer's colours; a word not listed here is drawn plain.
STATE_STYLES = {"done": "green", "running": "bold blue", "failed": "bold red",
                "waiting": "yellow", "pending": "dim", "skipped": "dim"}


def _fit(text: str, room: int) -> str:
    return text if len(text) <= room else text[:max(room - 1, 0)] + "…"


def _second_line(box: Box, states: Mapping[str, str] | None) -> str:
    if states is None:
        return box.kind
    return f"{box.kind} · {states.get(box.id, 'pending')}"


def _canvas(layout: Layout, states: Mapping[str, str] | None
            ) -> tuple[list[list[str]], dict[tuple[int, int], str]]:
    """The grid of characters, and which node's box covers each of its cells."""
    grid = [[" "] * layout.width for _ in range(layout.height)]
    owner: dict[tuple[int, int], str] = {}
    bits: dict[tuple[int, int], int] = {}

    def link(a: tuple[int, int], b: tuple[int, int]) -> None:
        (ax, ay), (bx, by) = a, b
        if ax == bx:
            step = 1 if by > ay else -1
            for yy in range(ay, by, step):
                bits[(ax, yy)] = bits.get((ax, yy), 0) | (DOWN if step > 0 else UP)
                bits[(ax, yy + step)] = bits.get((ax, yy + step), 0) | (UP if step > 0 else DOWN)
        else:
            step = 1 if bx > ax else -1
            for xx in range(ax, bx, step):
                bits[(xx, ay)] = bits.get((xx, ay), 0) | (RIGHT if step > 0 else LEFT)
                bits[(xx + step, ay)] = bits.get((xx + step, ay), 0) | (
                    LEFT if step > 0 else RIGHT)

    arrows: dict[tuple[int, int], str] = {}
    for edge in layout.edges:
        pts = edge.points
        bits[pts[0]] = bits.get(pts[0], 0) | UP  # joined to the box above
        for a, b in itertools.pairwise(pts):
            link(a, b)
        if len(pts) >= 2:
            (ax, ay), (bx, by) = pts[-2], pts[-1]
            way = DOWN if by > ay else UP if by < ay else RIGHT if bx > ax else LEFT
        else:
            way = DOWN
        arrows[pts[-1]] = ARROWS[way]
    for (cx, cy), joined in bits.items():
        if 0 <= cy < layout.height and 0 <= cx < layout.width:
            grid[cy][cx] = LINES.get(joined, "┼")
    for (cx, cy), ch in arrows.items():
        if 0 <= cy < layout.height and 0 <= cx < layout.width:
            grid[cy][cx] = ch

    for box in layout.boxes:
        inner = box.w - 2
        rows = ["╭" + "─" * inner + "╮",
                "│" + _fit(box.id, inner).center(inner) + "│",
                "│" + _fit(_second_line(box, states), inner).center(inner) + "│",
                "╰" + "─" * inner + "╯"]
        for dy, row in enumerate(rows[:box.h]):
            for dx, ch in enumerate(row):
                grid[box.y + dy][box.x + dx] = ch
                owner[(box.x + dx, box.y + dy)] = box.id
        for edge in layout.edges:  # where an edge leaves the box
            if edge.source == box.id:
                px, py = edge.points[0]
                if py == box.y + box.h and box.x < px < box.x + box.w - 1:
                    grid[py - 1][px] = "┬"

    for edge in layout.edges:
        if edge.label and edge.label_at is not None:
            lx, ly = edge.label_at
            for i, ch in enumerate(edge.label):
                cell = (lx + i, ly)
                if cell in owner or not (0 <= ly < layout.height and lx + i < layout.width):
                    break
                grid[ly][lx + i] = ch
    return grid, owner


def render_list(layout: Layout, states: Mapping[str, str] | None = None) -> str:
    """One line per node, rank by rank: ``id (kind) [state] -> target [label], ...``."""
    out = []
    for box in layout.boxes:
        state = f" [{states.get(box.id, 'pending')}]" if states is not None else ""
        nexts = [e.target + (f" [{e.label}]" if e.label else "") + (" (back)" if e.back else "")
                 for e in layout.edges if e.source == box.id]
        arrow = " -> " + ", ".join(nexts) if nexts else ""
        out.append(f"{box.id} ({box.kind}){state}{arrow}")
    return "\n".join(out) + ("\n" if out else "")


def render_text(layout: Layout, states: Mapping[str, str] | None = None, *,
                width: int | None = None) -> str:
    """The drawing as plain text; ``render_list`` instead when it is wider than ``width``."""
    if width is not None and layout.width > width:
        return render_list(layout, states)
    grid, _ = _canvas(layout, states)
    lines = ["".join(row).rstrip() for row in grid]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "".join(line + "\n" for line in lines)


def render_text_rich(layout: Layout, states: Mapping[str, str] | None = None, *,
                     width: int | None = None) -> Text:
    """``render_text`` as a rich ``Text``, each box in its state's colour."""
    from rich.text import Text

    if width is not None and layout.width > width:
        return Text(render_list(layout, states))
    grid, _ = _canvas(layout, states)
    lines = ["".join(row).rstrip() for row in grid]
    starts = []
    at = 0
    for line in lines:
        starts.append(at)
        at += len(line) + 1
    text = Text("".join(line + "\n" for line in lines))
    if states is not None:
        for box in layout.boxes:
            style = STATE_STYLES.get(states.get(box.id, "pending"))
            if style:
                for y in range(box.y, box.y + box.h):
                    text.stylize(style, starts[y] + box.x, starts[y] + box.x + box.w)
    return text
