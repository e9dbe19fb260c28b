"""The shipped ``todos`` example in a real Pi (RPC mode, the scripted model): a run of
the session ends completed and its ``presentation_prompt`` gives the session's model
exactly one turn, whose prompt is the example's text built from the run's result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .harness import Project, wait_for
from .piext_kit import STEP_S, extension_drill, follow_ups, session_id, steps, text_of
from .scripted_model import Reply, Request, Text

pytestmark = pytest.mark.slow  # real processes: an e2e drill

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "todos.workflow.py"


@pytest.mark.timeout(150)
def test_the_todos_example_is_presented_in_one_turn_of_the_session(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("todos", EXAMPLE.read_text())
    src = project.root / "src"
    src.mkdir()
    (src / "a.py").write_text("# TODO: one\n# FIXME: two\nx = 1\n")
    (src / "b.py").write_text("# TODO: three\n")
    seen: dict[str, Any] = {}

    def run_it(request: Request) -> Reply:
        # A run of this session ends while the model's turn is active: it is owed a turn.
        done = project.cli("run", "todos", "src", "--session", seen["sid"], "--json")
        seen["run"] = json.loads(done.stdout)["runId"]
        return Text("I ran it.")

    def presented(request: Request) -> Reply:
        seen["presented"] = request.texts("user")
        return Text("src has three TODO or FIXME lines, most in src/a.py.")

    with extension_drill(project, steps(run_it, presented), tmp_path / "pi") as drill:
        pi = drill.open()
        seen["sid"] = session_id(pi)
        assert pi.request({"type": "prompt", "message": "count the todos"})["success"]
        wait_for(lambda: len(follow_ups(pi)) == 1, STEP_S, what="the presentation",
                 diag=pi.diagnose)
        [turn] = follow_ups(pi)
        assert turn["details"]["kind"] == "presentation"
        text = text_of(turn)
        assert text.startswith(f"Workflow todos (run {seen['run']}) ended completed.\n\n"
                               "Tell the user in two or three sentences what was found in src:"
                               " 3 TODO or FIXME lines in 2 files.")
        assert '"path": "src/a.py"' in text  # the result goes with it, as data
        drill.model.wait_for_requests(2, STEP_S)
        assert any("3 TODO or FIXME lines in 2 files" in t for t in seen["presented"])
        drill.check()
