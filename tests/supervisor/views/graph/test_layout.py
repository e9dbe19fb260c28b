"""The layered layout: every node once, forward edges go down, loops are back edges,
boxes never overlap, the same snapshot always gives the same layout; every example
lays out, and 200 nodes lay out quickly."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import pytest
from pi_workflows.protocol.definitions.discovery import load_workflow_file
from pi_workflows.protocol.definitions.graph import snapshot
from pi_workflows.supervisor.views.graph.layout import Layout, edge_specs, layout

from .snapshots import EXAMPLES, LOOP, big, edge, snap, switch


def check_invariants(lay: Layout, snapshot_: dict[str, Any]) -> None:
    ids = [n["id"] for n in snapshot_["nodes"]]
    assert sorted(b.id for b in lay.boxes) == sorted(ids)  # every node exactly once
    boxes = {b.id: b for b in lay.boxes}
    for e in lay.edges:
        if not e.back:
            assert boxes[e.source].rank < boxes[e.target].rank, e
        # orthogonal polylines inside the drawing
        for (ax, ay), (bx, by) in itertools.pairwise(e.points):
            assert ax == bx or ay == by, e
        for px, py in e.points:
            assert 0 <= px < lay.width and 0 <= py < lay.height, e
            for b in lay.boxes:  # a line never runs through a box
                assert not (b.x <= px < b.x + b.w and b.y <= py < b.y + b.h), (e, b)
    for a, b in itertools.combinations(lay.boxes, 2):
        apart = (a.x + a.w <= b.x or b.x + b.w <= a.x or a.y + a.h <= b.y or b.y + b.h <= a.y)
        assert apart, (a, b)
    for b in lay.boxes:
        assert b.x >= 0 and b.x + b.w <= lay.width and b.y >= 0 and b.y + b.h <= lay.height
    assert {(e.source, e.target) for e in lay.edges} == {
        (s.source, s.target) for s in edge_specs(snapshot_)}


def test_loops_are_back_edges_and_do_not_push_their_target_down() -> None:
    lay = layout(LOOP)
    check_invariants(lay, LOOP)
    ranks = {b.id: b.rank for b in lay.boxes}
    assert ranks["a"] == 0 and ranks["b"] == 1 and ranks["c"] == 2 and ranks["d"] == 3
    back = {(e.source, e.target) for e in lay.edges if e.back}
    assert back == {("b", "a"), ("d", "d"), ("lost", "b")}
    assert ranks["lost"] == max(ranks.values())  # unreachable: the last rank
    labels = {(e.source, e.target): e.label for e in lay.edges}
    assert labels[("b", "a")] == "retry" and labels[("b", "d")] == "default"


def test_rank_is_the_longest_path() -> None:
    s = snap("a", ["a", "b", "c", "d"], [edge("a", "b"), switch("b", {1: "c", 2: "d"}),
                                          edge("c", "d")])
    lay = layout(s)
    check_invariants(lay, s)
    assert lay.box("d").rank == 3
    assert {e.label for e in lay.edges} == {None, "1", "2"}


def test_two_cases_to_one_target_are_one_edge_with_both_labels() -> None:
    s = snap("a", ["a", "b"], [switch("a", {True: "b", "x": "b"}, default="b")])
    (only,) = layout(s).edges
    assert only.label == "true, x, default"


def test_deterministic() -> None:
    assert layout(LOOP) == layout(LOOP)
    assert repr(layout(LOOP)) == repr(layout(dict(LOOP)))


def test_crossings_are_reduced() -> None:
    # a's children are listed b, c; their children the other way round: the
    # barycenter sweep puts them back in line, so no two edges of a gap cross.
    s = snap("a", ["a", "b", "c", "y", "x"], [
        switch("a", {1: "b", 2: "c"}), edge("b", "x"), edge("c", "y")])
    lay = layout(s)
    xs = {b.id: b.x for b in lay.boxes}
    assert (xs["b"] < xs["c"]) == (xs["x"] < xs["y"])


def test_includes_are_grouped() -> None:
    path = next(p for p in EXAMPLES if p.name == "compose.workflow.py")
    lay = layout(snapshot(load_workflow_file(path).workflow))
    (group,) = lay.groups
    assert group.label == "review"
    inside = [b for b in lay.boxes if b.group == "review"]
    assert {b.id for b in inside} == {"review", "review/score", "review/approve",
                                       "review/reject", "review.approved", "review.rejected"}
    for b in inside:
        assert group.x <= b.x and b.x + b.w <= group.x + group.w
        assert group.y <= b.y and b.y + b.h <= group.y + group.h


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_lays_out(path: Path) -> None:
    s = snapshot(load_workflow_file(path).workflow)
    check_invariants(layout(s), s)


def test_empty_and_odd_snapshots() -> None:
    assert layout({"nodes": [], "edges": []}).boxes == ()
    odd = {"startAt": "nope", "nodes": [{"id": "a"}, {"id": "a"}, {"kind": "x"}, "junk"],
           "edges": [edge("a", "missing"), {"type": "switch", "source": "a", "cases": None}]}
    lay = layout(odd)
    assert [b.id for b in lay.boxes] == ["a"] and lay.edges == ()


def test_two_hundred_nodes_quickly() -> None:
    s = big(200)
    began = time.monotonic()
    lay = layout(s)
    elapsed = time.monotonic() - began
    check_invariants(lay, s)
    assert elapsed < 5.0, elapsed
    assert any(e.back for e in lay.edges)
