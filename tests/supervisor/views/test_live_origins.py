"""The live view of a fork and of a continuation: where it came from and what it carried.

Real runs through the store and ``execute_claim`` (``Harness``), then the
live view over their bundles, as ``watch`` shows them afterwards.
"""

from __future__ import annotations

import io
import re

import pytest
from pi_workflows.supervisor.session.fork import fork_run
from pi_workflows.supervisor.views.follower import TraceFollower
from pi_workflows.supervisor.views.live import LiveView
from rich.console import Console

from tests.helpers.definitions import approve_flow
from tests.helpers.engine import Harness

pytestmark = pytest.mark.timeout(60)

ESC = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
CHECK = approve_flow()
# Two steps allowed, three nodes: the run fails between nodes (before `c`).
ASTRAY = """
workflow = define_workflow(
    start_at="a",
    max_steps=2,
    nodes=[compute("a", lambda ctx: 1), compute("b", lambda ctx: 2), compute("c", lambda ctx: 3)],
    edges=[edge("a", "b"), edge("b", "c")],
)
"""


def _shown(h: Harness, run_id: str) -> str:
    out = io.StringIO()
    view = LiveView(console=Console(file=out, force_terminal=True, width=200,
                                    color_system=None, highlight=False))
    follower = TraceFollower(h.bundle(run_id))
    view.show(follower)
    view.end(follower, h.row(run_id))
    return ESC.sub("", out.getvalue()).replace("\r", "")


def _last_grid(text: str) -> dict[str, str]:
    """Each node's state word in the last drawing of the grid."""
    rows: dict[str, str] = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 3 and words[1] in ("draft", "approve", "build"):
            rows[words[1]] = words[2]
    return rows


def _completed_chain(h: Harness) -> tuple[str, str]:
    h.write("check", CHECK)
    parent = h.launch("check", {})
    assert h.execute(parent).outcome == "waiting"
    child = h.answer(parent, "yes")
    assert h.execute(child).outcome == "completed"
    return parent, child


def test_a_fork_reads_as_a_fork_and_its_carried_steps_as_carried_not_skipped(
        h: Harness) -> None:
    _, child = _completed_chain(h)
    _, row = fork_run(h.store, h.runs, h.row(child), "build", fsync="never")
    assert h.execute(row.run_id).outcome == "completed"
    text = _shown(h, row.run_id)
    assert "after an interruption" not in text  # a host taking up a fork is no recovery
    assert f"forked from {child} at build" in text
    assert "carried from it (done there, not run again): approve, draft" in text
    assert _last_grid(text) == {"draft": "carried", "approve": "carried", "build": "done"}
    assert "skipped" not in text


def test_a_continuation_shows_the_steps_before_its_answer_as_carried(h: Harness) -> None:
    parent, child = _completed_chain(h)
    text = _shown(h, child)
    assert f"continues {parent} with the answer at approve" in text
    assert _last_grid(text) == {"draft": "carried", "approve": "done", "build": "done"}
    assert "skipped" not in text


def test_a_run_that_failed_between_nodes_is_told_to_fork_from_a_named_node(
        h: Harness) -> None:
    h.write("astray", ASTRAY)
    run_id = h.launch("astray", {})
    assert h.execute(run_id).outcome == "failed"
    text = _shown(h, run_id)
    # `fork RUN` alone would be refused (no failed node): the node is asked for.
    assert f"pi-workflows fork {run_id} --from NODE" in text
    assert f"pi-workflows fork {run_id}\n" not in text


def test_the_plain_lines_say_a_fork_and_a_continuation_where_they_come_from(
        h: Harness) -> None:
    parent, child = _completed_chain(h)
    _, row = fork_run(h.store, h.runs, h.row(child), "build", fsync="never")
    assert h.execute(row.run_id).outcome == "completed"
    first = TraceFollower(h.bundle(row.run_id)).lines()[0]
    assert first.endswith(f"run_started: fork of {child} at build, carried from it:"
                          " approve, draft")
    first = TraceFollower(h.bundle(child)).lines()[0]
    assert first.endswith(f"run_started: continues {parent} at approve")


def test_watch_of_an_answered_run_follows_the_chain_instead_of_asking_for_an_answer(
        h: Harness) -> None:
    from pi_workflows.supervisor.views.watch import watch

    h.write("check", CHECK)
    parent = h.launch("check", {})
    assert h.execute(parent).outcome == "waiting"
    child = h.answer(parent, "yes")
    plain: list[str] = []
    watch(h.store, h.runs, parent, echo=plain.append, poll_s=0.01)
    said = f"answered: the chain goes on as {child}; follow it with `pi-workflows watch {child}`"
    assert plain[-1] == said
    out = io.StringIO()
    view = LiveView(console=Console(file=out, force_terminal=True, width=200,
                                    color_system=None, highlight=False))
    watch(h.store, h.runs, parent, view=view, poll_s=0.01)
    text = ESC.sub("", out.getvalue()).replace("\r", "")
    assert "✓ answered at approve" in text and said in text
    assert "pi-workflows answer" not in text and "waiting for an answer" not in text


def test_the_plain_view_says_a_fork_was_taken_up_not_resumed(h: Harness) -> None:
    from pi_workflows.supervisor.views.runview import PlainView

    _, child = _completed_chain(h)
    _, row = fork_run(h.store, h.runs, h.row(child), "build", fsync="never")
    assert h.execute(row.run_id).outcome == "completed"
    lines: list[str] = []
    PlainView(lines.append).show(TraceFollower(h.bundle(row.run_id)))
    assert lines[1].endswith("#2 fork taken up at build")
    assert not any("resumed at" in line for line in lines)
