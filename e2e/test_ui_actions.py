"""The dashboard's actions in a real Chromium, against a real ``pi-workflows ui --actions``,
a real host and real runs.

A human decision's choices are buttons: a click answers it and the routed
continuation runs to completion; cancel stops a running shell step; a run
paused on the command line is resumed from the page and completes; a
finished run is forked from a selected node and the page links to the
fork; a POST without the CSRF token is refused 403 and the run's queue row
stays as it was; a run parked on a changed workflow file is not resumed
from the page, which names the command line's ``resume --force``.
"""

from __future__ import annotations

import http.client
import json
import os
from typing import Any

import pytest
from pi_workflows.protocol.store import QueueRow

from .harness import Project, wait_for
from .ui_kit import CHROMIUM, UiServer, browser, ui_server

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                 reason=f"{CHROMIUM} is missing (apt-get install chromium)")]

EXPECT_MS = 30_000

DECIDE = """
from pi_workflows import (choice, compute, define_workflow, edge, human_decision,
                          human_decision_edge)

workflow = define_workflow(
    start_at="draft",
    nodes=[
        compute("draft", lambda ctx: {"text": "note for " + ctx.input["task"]}),
        human_decision("review", question="Publish the note?", audience="the tester",
                       choices=[choice("publish", description="publish it"),
                                choice("drop", description="do not publish it")]),
        compute("published", lambda ctx: {"published": ctx.outputs["draft"]["text"]}),
        compute("dropped", lambda ctx: {"dropped": True}),
    ],
    edges=[edge("draft", "review"),
           human_decision_edge("review", {"publish": "published", "drop": "dropped"})],
)
"""

# A shell step that runs until the test writes ``release`` (or is stopped), then one more node.
GATED = """
from pi_workflows import compute, define_workflow, edge, shell

workflow = define_workflow(
    start_at="build",
    nodes=[
        shell("build", "while [ ! -f release ]; do sleep 0.05; done; echo built",
              idempotent=True),
        compute("report", lambda ctx: {"built": True}),
    ],
    edges=[edge("build", "report")],
)
"""

TWO_STEPS = """
from pi_workflows import compute, define_workflow, edge

workflow = define_workflow(
    start_at="first",
    nodes=[
        compute("first", lambda ctx: {"n": 1}),
        compute("second", lambda ctx: {"n": ctx.outputs["first"]["n"] + 1}),
    ],
    edges=[edge("first", "second")],
)
"""


def _open_run(chromium: Any, ui: UiServer, run: str) -> Any:
    from playwright.sync_api import expect

    page = chromium.new_page(viewport={"width": 1280, "height": 800})
    assert page.goto(ui.url).status == 200  # the token, kept in the cookie from here on
    page.goto(f"{ui.base}/runs/{run}")
    expect(page.locator("#live")).to_have_text("live", timeout=EXPECT_MS)
    # Set once the page is live: still there at the end only if nothing reloaded it.
    page.evaluate("window.__noReload = true")
    return page


def _node(page: Any, node: str) -> Any:
    return page.locator(f'#graph [data-node="{node}"]')


def _status(project: Project, run: str) -> str | None:
    return project.state(run).get("status")


@pytest.mark.timeout(180)
def test_a_human_decision_is_answered_by_a_choice_button(project: Project) -> None:
    from playwright.sync_api import expect

    project.write_workflow("decide", DECIDE)
    project.start_host()
    run = project.detach("decide", {"task": "the release"})
    wait_for(lambda: _status(project, run) == "waiting", 60, what="the decision")
    with ui_server(project, "--actions") as ui, browser() as chromium:
        page = _open_run(chromium, ui, run)
        expect(page.locator("#answer")).to_be_visible(timeout=EXPECT_MS)
        expect(page.locator("#question")).to_have_text("Publish the note?")
        buttons = page.locator("#choices button")
        expect(buttons).to_have_count(2)
        expect(buttons).to_have_text(["publish", "drop"])
        page.get_by_role("button", name="drop", exact=True).click()
        link = page.locator("#action-link")
        expect(link).to_be_visible(timeout=EXPECT_MS)
        child = link.inner_text()
        assert child and child != run
        expect(page.locator("#answer")).to_be_hidden(timeout=EXPECT_MS)  # answered: no more
        assert page.evaluate("window.__noReload") is True
        link.click()
        page.wait_for_url(f"**/runs/{child}")
        expect(page.locator("#live")).to_have_text("live", timeout=EXPECT_MS)
        # The routed branch ran; the other one never did.
        expect(_node(page, "dropped")).to_have_class("node state-done", timeout=EXPECT_MS)
        expect(page.locator("#run-state")).to_have_text("completed", timeout=EXPECT_MS)
        expect(_node(page, "published")).not_to_have_class("node state-done")
    assert ui.proc.returncode == 0
    with project.store() as store:
        continuation = store.continuation_of(run)
    assert continuation is not None and continuation.run_id == child
    assert _status(project, child) == "completed"
    assert project.state(child)["outputs"]["review"]["choice"] == "drop"


@pytest.mark.timeout(180)
def test_cancel_from_the_page_stops_a_running_step(project: Project) -> None:
    from playwright.sync_api import expect

    project.write_workflow("gated", GATED)
    project.start_host()
    run = project.detach("gated")
    wait_for(lambda: project.row(run).state == "running", 60, what="the run to start")
    with ui_server(project, "--actions") as ui, browser() as chromium:
        page = _open_run(chromium, ui, run)
        expect(_node(page, "build")).to_have_class("node state-running", timeout=EXPECT_MS)
        page.get_by_role("button", name="cancel run").click()
        expect(page.locator("#action-result")).to_contain_text("cancel requested",
                                                               timeout=EXPECT_MS)
        expect(page.locator("#run-state")).to_have_text("cancelled", timeout=EXPECT_MS)
        expect(page.get_by_role("button", name="cancel run")).to_be_hidden()
        assert page.evaluate("window.__noReload") is True
    assert ui.proc.returncode == 0
    assert project.row(run).state == "cancelled"
    assert _status(project, run) == "cancelled"
    assert "report" not in project.state(run).get("outputs", {})


@pytest.mark.timeout(180)
def test_a_run_paused_on_the_command_line_is_resumed_from_the_page(project: Project) -> None:
    from playwright.sync_api import expect

    project.write_workflow("gated", GATED)
    project.start_host()
    run = project.detach("gated")
    wait_for(lambda: project.row(run).state == "running", 60, what="the run to start")
    project.cli("pause", run, "--no-wait")
    project.release()  # the step in progress finishes; the run parks at the boundary
    wait_for(lambda: project.row(run).state == "parked", 60, what="the run to park paused")
    assert project.row(run).error_code == "paused"
    with ui_server(project, "--actions") as ui, browser() as chromium:
        page = _open_run(chromium, ui, run)
        expect(page.locator("#run-state")).to_have_text("paused", timeout=EXPECT_MS)
        resume = page.get_by_role("button", name="resume")
        expect(resume).to_be_visible(timeout=EXPECT_MS)
        resume.click()
        expect(page.locator("#action-result")).to_contain_text("resumed", timeout=EXPECT_MS)
        expect(_node(page, "report")).to_have_class("node state-done", timeout=EXPECT_MS)
        expect(page.locator("#run-state")).to_have_text("completed", timeout=EXPECT_MS)
        expect(resume).to_be_hidden()
        assert page.evaluate("window.__noReload") is True
    assert ui.proc.returncode == 0
    assert _status(project, run) == "completed"
    assert project.state(run)["outputs"]["report"] == {"built": True}


@pytest.mark.timeout(180)
def test_a_finished_run_is_forked_from_a_node_on_the_page(project: Project) -> None:
    from playwright.sync_api import expect

    project.write_workflow("two", TWO_STEPS)
    project.start_host()
    run = project.detach("two")
    wait_for(lambda: _status(project, run) == "completed", 60, what="the run to finish")
    with ui_server(project, "--actions") as ui, browser() as chromium:
        page = _open_run(chromium, ui, run)
        expect(page.locator("#run-state")).to_have_text("completed", timeout=EXPECT_MS)
        _node(page, "second").click()
        expect(page.locator("#inspector-hint")).to_have_text("node second")
        page.get_by_role("button", name="fork from the selected node").click()
        expect(page.locator("#action-result")).to_contain_text("forked from second",
                                                               timeout=EXPECT_MS)
        link = page.locator("#action-link")
        fork = link.inner_text()
        assert fork and fork != run
        assert page.evaluate("window.__noReload") is True
        link.click()
        page.wait_for_url(f"**/runs/{fork}")
        expect(page.locator("#run-state")).to_have_text("completed", timeout=EXPECT_MS)
    assert ui.proc.returncode == 0
    row = project.row(fork)
    assert (row.forked_from, row.fork_node) == (run, "second")
    state = project.state(fork)
    assert state["forkedFrom"] == run and state["outputs"]["second"] == {"n": 2}
    assert _status(project, run) == "completed"  # the original is never changed


def _still(row: QueueRow) -> dict[str, Any]:
    """The row without what a running worker's lease renewal changes by itself."""
    return {**row.public(), "claimToken": row.claim_token, "leaseExpiresAt": None,
            "updatedAt": None}


def _runs(project: Project) -> list[str]:
    with project.store() as store:
        return sorted(r.run_id for r in store.list_runs())


def _post(ui: UiServer, path: str, body: dict[str, Any],
          headers: dict[str, str]) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", ui.port, timeout=10)
    try:
        conn.request("POST", path, body=json.dumps(body),
                     headers={"Content-Type": "application/json",
                              "Origin": ui.base, **headers})
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


@pytest.mark.timeout(180)
def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(
        project: Project) -> None:
    project.write_workflow("gated", GATED)
    project.start_host()
    run = project.detach("gated")
    wait_for(lambda: project.row(run).state == "running", 60, what="the run to start")
    before, runs = project.row(run), _runs(project)
    with ui_server(project, "--actions") as ui:
        cookie = {"Cookie": f"pi_workflows_token_{ui.port}={ui.token}"}
        # Everything but the CSRF token is right: the token, the Host, the Origin.
        status, text = _post(ui, f"/runs/{run}/cancel", {}, cookie)
        assert (status, text.strip()) == (403, "forbidden: missing or bad CSRF token")
        status, text = _post(ui, f"/runs/{run}/cancel", {"csrf": "not-the-token"}, cookie)
        assert status == 403
        status, _ = _post(ui, f"/runs/{run}/cancel", {},
                          {**cookie, "X-CSRF-Token": "not-the-token"})
        assert status == 403
        status, _ = _post(ui, f"/runs/{run}/fork", {"from": "build"}, cookie)
        assert status == 403
        after = project.row(run)
        assert _still(after) == _still(before)
        assert not after.cancel_requested and after.state == "running"
        assert _runs(project) == runs  # no fork was queued
    project.release()
    wait_for(lambda: _status(project, run) == "completed", 60, what="the run to finish")
    assert ui.proc.returncode == 0


@pytest.mark.timeout(180)
def test_the_page_leaves_a_changed_workflow_file_to_the_command_line(
        project: Project) -> None:
    from playwright.sync_api import expect

    flow = project.write_workflow("gated", GATED)
    project.start_host()
    run = project.detach("gated")
    wait_for(lambda: project.row(run).state == "running", 60, what="the run to start")
    project.cli("pause", run, "--no-wait")
    project.release()
    wait_for(lambda: project.row(run).error_code == "paused", 60, what="the run to park paused")
    flow.write_text(flow.read_text() + "# changed while it was paused\n")
    with ui_server(project, "--actions") as ui, browser() as chromium:
        page = _open_run(chromium, ui, run)
        resume = page.get_by_role("button", name="resume")
        resume.click()  # the host takes it, finds the file changed and parks it again
        wait_for(lambda: project.row(run).error_code == "source_changed", 60,
                 what="the run to park on its changed file")
        expect(resume).to_be_visible(timeout=EXPECT_MS)
        resume.click()
        result = page.locator("#action-result")
        expect(result).to_have_class("refused", timeout=EXPECT_MS)
        expect(result).to_contain_text(f"pi-workflows resume {run} --force")
    assert ui.proc.returncode == 0
    assert project.row(run).error_code == "source_changed"  # refused: nothing changed
    project.cli("resume", run, "--force")
    wait_for(lambda: _status(project, run) == "completed", 60, what="the forced resume")
