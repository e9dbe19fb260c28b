"""The drill's checker on a composed run: an include's entry and exit route into the
nodes after them, so a child's first node and the node after an exit are entered once."""

from __future__ import annotations

from typing import Any

from pi_workflows.supervisor.drill.checker import check

from tests.supervisor.drill.test_checker import ev, good


def composed_events() -> list[dict[str, Any]]:
    return [
        ev(1, "run_started", startAt="m"),
        ev(2, "include_entered", "m", None, mount="m", workflow="c", next="m/x"),
        ev(3, "node_started", "m/x", "m/x-1-aaaaaa", step=1),
        ev(4, "node_finished", "m/x", "m/x-1-aaaaaa", next="m.done"),
        ev(5, "include_exited", "m.done", None, mount="m", exit="done", next="fx"),
        ev(6, "node_started", "fx", "fx-2-bbbbbb", step=2),
        ev(7, "effect_recorded", "fx", "fx-2-bbbbbb", effect="pending"),
        ev(8, "run_resumed", at=2000, boundary=True, resumePoint="fx"),
        ev(9, "node_started", "fx", "fx-2-cccccc", step=2, rerun=True),
        ev(10, "effect_recorded", "fx", "fx-2-cccccc", effect="replayed"),
        ev(11, "node_finished", "fx", "fx-2-cccccc", next=None),
        ev(12, "run_completed"),
    ]


def test_a_composed_run_checks_clean() -> None:
    assert check(good(composed_events()), final=False) == []


def test_a_child_node_ending_twice_is_still_caught() -> None:
    events = composed_events()
    twice = [*events[:4], ev(5, "node_started", "m/x", "m/x-1-dddddd", step=2),
             ev(6, "node_finished", "m/x", "m/x-1-dddddd", next="m.done")]
    found = check(good(twice), final=False)
    assert any(v.kind == "node_finished_twice" for v in found)
