"""The three drawings: text (ids, states, no ANSI, a list when too wide), SVG (parses,
one ``g.node`` per node, everything escaped, deterministic) and DOT (quoted, escaped)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from pi_workflows.protocol.definitions.discovery import load_workflow_file
from pi_workflows.protocol.definitions.graph import snapshot
from pi_workflows.supervisor.views.graph.dot import render_dot
from pi_workflows.supervisor.views.graph.layout import layout
from pi_workflows.supervisor.views.graph.svg import render_svg
from pi_workflows.supervisor.views.graph.text import render_list, render_text, render_text_rich

from .snapshots import EXAMPLES, LOOP, big, edge, snap, switch

SVG = "{http://www.w3.org/2000/svg}"
NASTY = 'a<&"b'
NASTY_SNAP: dict[str, Any] = snap(NASTY, [NASTY, "x'y>", "plain"], [
    switch(NASTY, {"<case & \"q\">": "x'y>"}, default="plain")])
STATES = {"a": "done", "b": "running", "c": "failed", "d": "waiting", "lost": "skipped"}


def test_text_shows_every_id_and_state_without_ansi() -> None:
    drawn = render_text(layout(LOOP), STATES)
    for node_id in ("a", "b", "c", "d", "lost"):
        assert re.search(rf"│\s*{node_id}\s*│", drawn), node_id
    for state in STATES.values():
        assert f"compute · {state}" in drawn
    assert "\x1b" not in drawn
    assert "▼" in drawn and "retry" in drawn and "default" in drawn
    assert "pending" not in drawn and "compute · " in drawn
    plain = render_text(layout(LOOP))
    assert "·" not in plain and "compute" in plain


def test_text_of_a_switch_draws_its_branches() -> None:
    path = next(p for p in EXAMPLES if p.name == "triage.workflow.py")
    drawn = render_text(layout(snapshot(load_workflow_file(path).workflow)))
    lines = drawn.splitlines()
    fan = next(line for line in lines if "┼" in line or "┴" in line)
    assert fan.count("┐") == 1 and fan.count("┌") == 1  # one bus to the three targets
    assert next(i for i, line in enumerate(lines) if "bug" in line and "feature" in line) \
        < next(i for i, line in enumerate(lines) if "report" in line)


def test_text_an_unknown_state_word_is_shown_as_is() -> None:
    assert "compute · thinking" in render_text(layout(LOOP), {"a": "thinking"})


def test_text_falls_back_to_a_list_when_too_wide() -> None:
    lay = layout(big(60))
    narrow = render_text(lay, {"n0": "done"}, width=80)
    assert narrow == render_list(lay, {"n0": "done"})
    assert narrow.splitlines()[0].startswith("n0 (compute) [done] -> n1")
    assert len(narrow.splitlines()) == 60
    wide = render_text(lay, width=lay.width)
    assert "╭" in wide and max(len(line) for line in wide.splitlines()) <= lay.width


def test_list_marks_back_edges_and_labels() -> None:
    listed = render_list(layout(LOOP))
    assert "b (compute) -> a [retry] (back)" in listed


def test_rich_text_colours_boxes_by_state() -> None:
    rich = render_text_rich(layout(LOOP), STATES)
    assert render_text(layout(LOOP), STATES).strip("\n") in rich.plain
    styles = {str(span.style) for span in rich.spans}
    assert {"green", "bold blue", "bold red", "yellow"} <= styles


def nodes_of(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if "node" in (g.get("class") or "").split()]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_svg_of_every_example_parses(path: Path) -> None:
    s = snapshot(load_workflow_file(path).workflow)
    root = ET.fromstring(render_svg(layout(s)))
    assert [g.get("data-node") for g in nodes_of(root)] == [b.id for b in layout(s).boxes]
    assert len(list(root.iter(f"{SVG}path"))) >= len(s["edges"])


def test_svg_escapes_ids_and_labels() -> None:
    out = render_svg(layout(NASTY_SNAP), {NASTY: "running", "x'y>": "we<ird"}, selected=NASTY)
    root = ET.fromstring(out)
    found = {g.get("data-node"): g.get("class") for g in nodes_of(root)}
    assert found == {NASTY: "node state-running selected", "x'y>": "node state-we-ird",
                     "plain": "node state-pending"}
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert NASTY in texts and "x'y>" in texts and '<case & "q">' in texts
    assert "<script" not in out and "href" not in out and "http" not in out.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")


def test_svg_is_deterministic_and_styled() -> None:
    first = render_svg(layout(LOOP), STATES)
    assert first == render_svg(layout(LOOP), dict(STATES))
    root = ET.fromstring(first)
    style = next(root.iter(f"{SVG}style")).text or ""
    for state in ("done", "running", "failed", "waiting", "pending"):
        assert f".state-{state} rect" in style
    edges = [p for p in root.iter(f"{SVG}path") if "edge" in (p.get("class") or "").split()]
    assert len(edges) == len(layout(LOOP).edges)
    assert all(p.get("marker-end") == "url(#arrow)" for p in edges)
    assert sum("back" in (p.get("class") or "") for p in edges) == 3


def test_svg_control_characters_still_parse() -> None:
    s = snap("a\x01b", ["a\x01b"], [])
    root = ET.fromstring(render_svg(layout(s)))
    assert nodes_of(root)[0].get("data-node") == "a\ufffdb"


def test_dot_quotes_and_escapes() -> None:
    s = snap("a", ['q"uote', "back\\slash", "new\nline"], [
        edge('q"uote', "back\\slash"), switch("back\\slash", {'c"1': "new\nline"})])
    dot = render_dot(s, {'q"uote': "done"})
    assert '"q\\"uote" [label="q\\"uote\\ncompute · done", fillcolor="#e6f4ea"];' in dot
    assert '"q\\"uote" -> "back\\\\slash";' in dot
    assert '"back\\\\slash" -> "new\\nline" [label="c\\"1"];' in dot
    assert "\nline" not in dot.replace("\\nline", "")


def test_dot_clusters_an_include() -> None:
    path = next(p for p in EXAMPLES if p.name == "compose.workflow.py")
    dot = render_dot(snapshot(load_workflow_file(path).workflow))
    assert 'subgraph "cluster_0" {' in dot and 'label="review";' in dot
    assert '"review/score" -> "review/approve" [label="good"];' in dot
