"""The dashboard's controllers page in a real Chromium: a resource applied from the CLI
appears without a reload and turns Ready once a real host has reconciled it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .harness import Project
from .snippets import GATE_CONTROLLER
from .ui_kit import CHROMIUM, artifacts, browser, screenshot, ui_server

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                 reason=f"{CHROMIUM} is missing (apt-get install chromium)")]


EXPECT_MS = 30_000


@pytest.mark.timeout(180)
def test_a_resource_appears_and_turns_ready_on_the_open_page(project: Project,
                                                              tmp_path: Path) -> None:
    from playwright.sync_api import expect

    folder = project.root / ".pi" / "workflows"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gate.controller.py").write_text(GATE_CONTROLLER)
    shots = artifacts(tmp_path / "shots")
    with ui_server(project) as ui, browser() as chromium:
        page = chromium.new_page(viewport={"width": 1280, "height": 600})
        assert page.goto(f"{ui.base}/controllers?token={ui.token}").status == 200
        expect(page.locator("#live")).to_have_text("live", timeout=EXPECT_MS)
        page.evaluate("window.__noReload = true")
        project.cli("controller", "apply", "gate", "k1", "--spec-json", '{"n": 1}')
        row = page.locator('tr[data-resource="gate/k1"]')
        expect(row).to_contain_text("Ready=unknown", timeout=EXPECT_MS)  # no host yet
        expect(page.locator("#not-ready")).to_have_text("1")
        project.start_host()
        expect(row).to_contain_text("Ready=true", timeout=EXPECT_MS)
        expect(row).to_contain_text("Done")
        expect(page.locator("#not-ready")).to_have_text("0", timeout=EXPECT_MS)
        assert page.evaluate("window.__noReload") is True  # every change came live
        screenshot(page, shots, "controllers", "ui-controllers.png")
