"""The web dashboard in a real Chromium, against a real ``pi-workflows ui`` and a real host.

The list shows a queued run without a reload; a node turns running, then
done, on the open page; the inspector shows a shell step's output while it
is written; with ``--actions`` a checkpoint is answered from the page and
its continuation appears; without the token a request is refused; without
``--actions`` the page has no action controls. Screenshots go to
``PI_WORKFLOWS_ARTIFACTS`` (and ``docs/images`` with
``PI_WORKFLOWS_DOC_SCREENSHOTS=1``).
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from .harness import Project, wait_for
from .snippets import REVIEW
from .ui_kit import CHROMIUM, artifacts, browser, screenshot, ui_server

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                 reason=f"{CHROMIUM} is missing (apt-get install chromium)")]

BUILD = """
from pi_workflows import define_workflow, shell, compute, edge

workflow = define_workflow(
    start_at="build",
    nodes=[
        shell("build", "echo compiling-module-one; echo compiling-module-two;"
                       " while [ ! -f release ]; do sleep 0.05; done; echo build-finished",
              idempotent=True),
        compute("report", lambda ctx: {"built": True, "lines": 3}),
    ],
    edges=[edge("build", "report")],
)
"""
EXPECT_MS = 30_000


def _node(page: object, node: str) -> object:
    return page.locator(f'#graph [data-node="{node}"]')  # type: ignore[attr-defined]


@pytest.mark.timeout(180)
def test_the_list_and_a_run_update_live_and_read_only_has_no_actions(
        project: Project, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    shots = artifacts(tmp_path / "shots")
    project.write_workflow("build", BUILD)
    project.write_workflow("review", REVIEW)
    project.start_host()
    with ui_server(project) as ui, browser() as chromium:
        # Without the token: refused, by the server (not by a page script).
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{ui.base}/", timeout=10)
        assert refused.value.code == 403
        page = chromium.new_page(viewport={"width": 1280, "height": 800})
        assert page.goto(f"{ui.base}/").status == 403

        assert page.goto(ui.url).status == 200
        expect(page.locator("#live")).to_have_text("live", timeout=EXPECT_MS)
        page.evaluate("window.__noReload = true")
        earlier = project.detach("review", {"task": "the docs"})
        expect(page.locator(f'tr[data-run="{earlier}"]')).to_be_visible(timeout=EXPECT_MS)
        run = project.detach("build")
        row = page.locator(f'tr[data-run="{run}"]')
        expect(row).to_be_visible(timeout=EXPECT_MS)  # queued, shown without a reload
        expect(row.locator(".state")).to_have_text("running", timeout=EXPECT_MS)
        elapsed = row.locator("td.num")
        expect(elapsed).not_to_have_text(elapsed.inner_text(), timeout=5000)  # it ticks
        assert page.evaluate("window.__noReload") is True
        screenshot(page, shots, "list", "ui-list.png")

        row.locator("a").click()
        page.wait_for_url(f"**/runs/{run}")
        expect(page.locator("#live")).to_have_text("live", timeout=EXPECT_MS)
        page.evaluate("window.__noReload = true")
        build = page.locator('#graph [data-node="build"]')
        expect(build).to_have_class("node state-running", timeout=EXPECT_MS)
        build.click()
        shell = page.locator("#inspector-body pre.shell")
        expect(shell).to_contain_text("compiling-module-two", timeout=EXPECT_MS)
        assert page.locator("[data-action]").count() == 0  # read-only: no controls
        assert page.locator('meta[name="csrf-token"]').count() == 0

        project.release()
        expect(build).to_have_class("node state-done selected", timeout=EXPECT_MS)
        expect(page.locator('#graph [data-node="report"]')).to_have_class(
            "node state-done", timeout=EXPECT_MS)
        expect(shell).to_contain_text("build-finished", timeout=EXPECT_MS)
        expect(page.locator("#run-state")).to_have_text("completed", timeout=EXPECT_MS)
        assert page.evaluate("window.__noReload") is True  # every change came live
        screenshot(page, shots, "run", "ui-run.png")

        # A POST is refused without --actions, whatever the page sends.
        status = page.evaluate(
            "async (u) => (await fetch(u, {method: 'POST'})).status",
            f"/runs/{run}/cancel")
        assert status == 403
    assert ui.proc.returncode == 0


@pytest.mark.timeout(180)
def test_a_checkpoint_is_answered_from_the_page_with_actions(
        project: Project, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    shots = artifacts(tmp_path / "shots")
    project.write_workflow("review", REVIEW)
    project.start_host()
    run = project.detach("review", {"task": "the release note"})
    wait_for(lambda: project.state(run).get("status") == "waiting", 60, what="the checkpoint")
    with ui_server(project, "--actions") as ui, browser() as chromium:
        page = chromium.new_page(viewport={"width": 1280, "height": 800})
        assert page.goto(f"{ui.url}").status == 200
        page.goto(f"{ui.base}/runs/{run}")
        expect(page.locator("#live")).to_have_text("live", timeout=EXPECT_MS)
        expect(page.locator("#answer")).to_be_visible(timeout=EXPECT_MS)
        page.fill("#answer-input", "ship it")
        page.click('#answer-text button[data-action="answer"]')
        link = page.locator("#action-link")
        expect(link).to_be_visible(timeout=EXPECT_MS)
        child = link.inner_text()
        assert child and child != run
        screenshot(page, shots, "answered")
        link.click()
        page.wait_for_url(f"**/runs/{child}")
        expect(page.locator('#graph [data-node="publish"]')).to_have_class(
            "node state-done", timeout=EXPECT_MS)
        expect(page.locator("#chain")).to_contain_text(run)
        # Answered once: a second answer is refused with the CLI's own message.
        page.goto(f"{ui.base}/runs/{run}")
        status = page.evaluate(
            """async ([u, t]) => (await fetch(u, {method: 'POST', headers:
                 {'content-type': 'application/json', 'x-csrf-token': t},
                 body: JSON.stringify({text: 'again'})})).status""",
            [f"/runs/{run}/answer",
             page.locator('meta[name="csrf-token"]').get_attribute("content")])
        assert status == 409
    assert ui.proc.returncode == 0
    assert project.state(child).get("status") == "completed"
