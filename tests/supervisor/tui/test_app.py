"""The terminal viewer driven by Textual's test pilot over real recorded runs.

Each test runs the app on a headless screen against the real view stream
of a project whose runs were executed for real (``recorded``), presses
keys as a person would and reads what the screen shows: the list's rows,
the filters, a run's graph with its node states, replay moving a node's
shown state, ``q`` going back, and a run written while the list is shown.
With ``PI_WORKFLOWS_DOC_SCREENSHOTS=1`` two tests save the screenshots of
``docs/view.md``.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from pi_workflows.supervisor.tui.app import ListScreen, RunScreen, ViewerApp
from pi_workflows.supervisor.views.stream import ListQuery
from textual.pilot import Pilot
from textual.widgets import DataTable
from textual.widgets._footer import FooterKey

from .recorded import SHIP, Recorded, shown_states

pytestmark = pytest.mark.timeout(90)

DOCS = Path(__file__).resolve().parents[3] / "docs" / "images"
SIZE = (140, 40)


async def until(pilot: Pilot[Any], cond: Callable[[], bool], what: str,
                timeout: float = 15.0) -> None:
    """Let the app run until ``cond()`` holds (its follow threads post messages meanwhile)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def drive(app: ViewerApp, body: Callable[[Pilot[Any]], Awaitable[None]]) -> None:
    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await body(pilot)

    asyncio.run(main())


def list_ids(app: ViewerApp) -> list[str]:
    screen = app.screen
    assert isinstance(screen, ListScreen)
    table = screen.query_one("#runs", DataTable)
    return [str(table.get_row_at(i)[0]).strip(" └") for i in range(table.row_count)]


def list_cells(app: ViewerApp, run_id: str) -> list[str]:
    table = app.screen.query_one("#runs", DataTable)
    return [str(c) for c in table.get_row(run_id)]


def run_screen(app: ViewerApp) -> RunScreen:
    screen = app.screen
    assert isinstance(screen, RunScreen), screen
    return screen


def node_state(screen: RunScreen, node: str) -> str | None:
    """The state the drawn graph shows for ``node``; None before the graph is drawn."""
    return shown_states(screen.shown_graph()).get(node)


def test_the_list_shows_every_run_with_its_state(recorded: Recorded) -> None:
    app = ViewerApp(recorded.stream(), ListQuery())

    async def body(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: len(list_ids(app)) == 3, "three runs")
        assert set(list_ids(app)) == {recorded.shipped, recorded.waiting, recorded.broken}
        assert list_cells(app, recorded.shipped)[1:3] == ["ship", "completed"]
        assert list_cells(app, recorded.waiting)[2].startswith("waiting")
        assert list_cells(app, recorded.broken)[2] == "failed"
        def footer_keys() -> set[str]:
            return {str(key.key_display) for key in app.screen.query(FooterKey)}

        await until(pilot, lambda: {"q", "s", "w", "/"} <= footer_keys(), "the keys shown")
        if os.environ.get("PI_WORKFLOWS_DOC_SCREENSHOTS") == "1":
            DOCS.mkdir(parents=True, exist_ok=True)
            app.save_screenshot("view-list.svg", str(DOCS))

    drive(app, body)


def test_filters_by_state_workflow_and_text(recorded: Recorded) -> None:
    app = ViewerApp(recorded.stream(), ListQuery())
    everyone = {recorded.shipped, recorded.waiting, recorded.broken}

    async def body(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: set(list_ids(app)) == everyone, "every run")
        screen = app.screen
        assert isinstance(screen, ListScreen)
        # s cycles through the states seen: each stop shows only runs in that state.
        seen: dict[str, set[str]] = {}
        for _ in range(4):
            await pilot.press("s")
            state = screen.query_.state
            if state is None:
                await until(pilot, lambda: set(list_ids(app)) == everyone, "every run again")
                break
            await until(pilot, lambda want=state: screen.followed.doc.get("query", {})
                        .get("state") == want, f"the list for {state}")
            seen[state] = set(list_ids(app))
        assert seen["completed"] == {recorded.shipped}
        assert seen["failed"] == {recorded.broken}
        # w: only the workflow's runs.
        while screen.query_.workflow != "check":
            await pilot.press("w")
        await until(pilot, lambda: set(list_ids(app)) == {recorded.waiting}, "check's runs")
        await pilot.press("escape")
        await until(pilot, lambda: set(list_ids(app)) == everyone, "filters cleared")
        # / then text: a case-insensitive substring of the id, workflow or title.
        await pilot.press("slash", "B", "R", "O")
        await until(pilot, lambda: set(list_ids(app)) == {recorded.broken}, "text 'bro'")
        await pilot.press("enter")
        assert "text: BRO" in str(screen.query_one("#filters").render())
        # Keys typed into the text filter are text, not the list's keys (s, w, q).
        await pilot.press("escape")
        await until(pilot, lambda: set(list_ids(app)) == everyone, "filters cleared again")
        await pilot.press("slash", "s", "h", "i", "p")
        await until(pilot, lambda: set(list_ids(app)) == {recorded.shipped}, "text 'ship'")
        assert screen.query_.state is None and app.return_code is None

    drive(app, body)


def test_enter_opens_a_run_its_graph_shows_node_states_and_q_goes_back(
        recorded: Recorded) -> None:
    app = ViewerApp(recorded.stream(), ListQuery(workflow="broken"))

    async def body(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: list_ids(app) == [recorded.broken], "the broken run")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunScreen)
                    and bool(app.screen.followed.doc), "the run detail")
        screen = run_screen(app)
        await until(pilot, lambda: "explode" in screen.shown_graph(), "the graph")
        assert node_state(screen, "prep") == "done"
        assert node_state(screen, "explode") == "failed"
        assert "╭" in screen.shown_graph() and "▼" in screen.shown_graph()  # boxes, edges
        inspector = str(screen.query_one("#inspector").render())
        assert inspector  # the first step is selected
        await pilot.press("down")
        await until(pilot, lambda: "the build is broken" in
                    str(screen.query_one("#inspector").render()), "the error in the inspector")
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ListScreen), "back on the list")
        await pilot.press("q")
        await until(pilot, lambda: app.return_code == 0, "the app to quit")

    drive(app, body)


def test_replay_steps_back_through_the_history_and_forward_to_live(
        recorded: Recorded) -> None:
    app = ViewerApp(recorded.stream(), ListQuery(), run_id=recorded.shipped)

    async def body(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: isinstance(app.screen, RunScreen)
                    and "report" in app.screen.shown_graph(), "the shipped run's graph")
        screen = run_screen(app)
        assert node_state(screen, "build") == "done" and screen.replay.live
        trace = screen.followed.doc["trace"]
        shown = []
        for _ in range(len(trace)):
            await pilot.press("left")
            shown.append(node_state(screen, "build"))
        assert not screen.replay.live
        assert shown[-1] == "pending", shown  # at the first event build had not run
        assert "running" in shown, shown
        steps = screen.query_one("#steps", DataTable)
        assert steps.row_count < len(screen.followed.doc["steps"])
        for _ in range(len(trace)):
            await pilot.press("right")
        assert screen.replay.live
        assert node_state(screen, "build") == "done"
        assert steps.row_count == len(screen.followed.doc["steps"])
        if os.environ.get("PI_WORKFLOWS_DOC_SCREENSHOTS") == "1":
            await pilot.press("down")
            DOCS.mkdir(parents=True, exist_ok=True)
            app.save_screenshot("view-run.svg", str(DOCS))

    drive(app, body)


def test_a_chain_reads_as_one_run_its_continuation_under_it(recorded: Recorded) -> None:
    child = recorded.h.answer(recorded.waiting, "yes")
    assert recorded.h.execute(child).outcome == "completed"
    app = ViewerApp(recorded.stream(), ListQuery(workflow="check"))

    async def body(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: list_ids(app) == [recorded.waiting, child], "the chain")
        assert list_cells(app, child)[0].startswith("  └ ")
        assert list_cells(app, recorded.waiting)[0] == recorded.waiting

    drive(app, body)


def test_a_run_written_while_the_list_is_shown_appears_and_updates(
        recorded: Recorded) -> None:
    app = ViewerApp(recorded.stream(), ListQuery())

    async def body(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: len(list_ids(app)) == 3, "the three runs")
        fresh = recorded.h.launch("ship", {})
        await until(pilot, lambda: fresh in list_ids(app), "the queued run")
        assert list_cells(app, fresh)[2] != "completed"
        assert recorded.h.execute(fresh).outcome == "completed"
        await until(pilot, lambda: list_cells(app, fresh)[2] == "completed", "the run completed")

    drive(app, body)


def test_a_run_opened_live_follows_its_steps(recorded: Recorded) -> None:
    fresh = recorded.h.launch("ship", {})
    app = ViewerApp(recorded.stream(), ListQuery(), run_id=fresh)

    async def body(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: isinstance(app.screen, RunScreen)
                    and bool(app.screen.followed.doc), "the queued run's detail")
        screen = run_screen(app)
        assert "done" not in shown_states(screen.shown_graph()).values()
        assert recorded.h.execute(fresh).outcome == "completed"
        await until(pilot, lambda: node_state(screen, "report") == "done", "report done")
        await until(pilot, lambda: screen.query_one("#steps", DataTable).row_count == 3,
                    "three steps")

    assert "report" in SHIP
    drive(app, body)


def test_an_error_while_following_is_shown_and_the_stream_opened_again(
        recorded: Recorded) -> None:
    """A store busy past its timeout while the list rebuilds: shown on the screen, the
    app goes on (a follow thread that raised would end it with a traceback)."""
    from pi_workflows.protocol.errors import StoreError

    stream = recorded.stream()
    opened: list[int] = []

    class Flaky:
        def subscribe_list(self, query: ListQuery) -> Any:
            sub = stream.subscribe_list(query)
            opened.append(1)
            if len(opened) == 1:
                def broken(timeout: float) -> Any:
                    raise StoreError("the store is busy (database is locked)")
                sub.next = broken  # type: ignore[method-assign]
            return sub

        def subscribe_run(self, run_id: str) -> Any:
            return stream.subscribe_run(run_id)

    app = ViewerApp(Flaky(), ListQuery())  # type: ignore[arg-type]
    seen: list[str] = []

    async def body(pilot: Pilot[Any]) -> None:
        def status() -> str:
            text = str(app.screen.query_one("#status").render())
            seen.append(text)
            return text

        await until(pilot, lambda: "database is locked" in status(), "the error shown")
        await until(pilot, lambda: len(opened) >= 2, "the stream opened again")
        await until(pilot, lambda: len(list_ids(app)) == 3, "the runs after the retry")
        assert app.is_running

    drive(app, body)
