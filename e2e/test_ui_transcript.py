"""An agent step's conversation on the dashboard's run page, as a chat transcript read
from Pi's own session file: a real Pi against the scripted model, a real host, a real
``pi-workflows ui``, a real Chromium."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .agents_kit import Turn, submit, use_brain
from .harness import Project, wait_for
from .scripted_model import Reply, Text, ToolCalls
from .ui_kit import CHROMIUM, artifacts, browser, screenshot, ui_server

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                 reason=f"{CHROMIUM} is missing (apt-get install chromium)")]

ASK = """
from pi_workflows import define_workflow, agent

workflow = define_workflow(
    start_at="look",
    nodes=[agent("look", "Find the three biggest files",
                 expected_output={"type": "array", "items": {"type": "string"}})],
    edges=[],
)
"""
EXPECT_MS = 30_000


@pytest.mark.timeout(180)
def test_the_agent_conversation_reads_as_a_chat_transcript(project: Project,
                                                           tmp_path: Path) -> None:
    from playwright.sync_api import expect

    project.write_workflow("ask", ASK)

    def decide(turn: Turn) -> Reply | None:
        if turn.index == 0:
            return Text("The biggest files are a.bin, b.bin and c.bin.")
        return ToolCalls(submit(turn.attempt, ["a.bin", "b.bin", "c.bin"]))

    with use_brain(project, tmp_path, decide):
        project.start_host()
        run = project.detach("ask")
        wait_for(lambda: project.row(run).state == "done", 90, what="the agent run done")
        with ui_server(project) as ui, browser() as chromium:
            page = chromium.new_page(viewport={"width": 1280, "height": 900})
            assert page.goto(f"{ui.base}/runs/{run}?token={ui.token}").status == 200
            chat = page.locator("#conversation")
            user = chat.locator(".msg.user").first
            expect(user).to_contain_text("Find the three biggest files", timeout=EXPECT_MS)
            expect(chat.locator(".msg.assistant").first).to_contain_text(
                "The biggest files are a.bin, b.bin and c.bin.")
            expect(chat.locator("pre.tool-call").first).to_contain_text("→ workflow")
            expect(chat.locator(".msg.tool").first).to_contain_text("tool workflow")
            screenshot(page, artifacts(tmp_path / "shots"), "transcript", "ui-transcript.png")
