"""``examples/progress.workflow.py`` runs as its docstring says: the shell loop's
lines become progress updates (the last one: all items done), ``parse`` makes the
node's output, the final message counts the items; bad input is one clear line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pi_workflows.protocol.definitions.discovery import load_workflow_file
from pi_workflows.protocol.definitions.values import apply_input

from tests.helpers.cli import run_cli
from tests.helpers.engine import Harness, assert_well_formed

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "progress.workflow.py"


def test_the_example_loads_and_reads_its_input() -> None:
    loaded = load_workflow_file(EXAMPLE)
    assert loaded.name == "progress" and loaded.workflow.description
    wf = loaded.workflow
    assert apply_input(wf, {"task": "12"}) == {"items": 12}
    assert apply_input(wf, {"items": 3}) == {"items": 3}
    assert apply_input(wf, {}) == {"items": 10}
    for bad, why in (({"task": "many"}, "give the number of items"),
                     ({"items": 0}, "must be 1 to 200")):
        with pytest.raises(Exception, match=why):
            apply_input(wf, bad)
    assert run_cli("validate", str(EXAMPLE)).returncode == 0


def test_the_example_runs_and_its_lines_become_progress(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROGRESS_STEP_S", "0.05")
    shutil.copy(EXAMPLE, h.workflows / "progress.workflow.py")
    run_id = h.launch("progress", {"task": "6"})
    assert h.execute(run_id).outcome == "completed"
    state = h.state(run_id)
    assert state["outputs"]["process"] == {"processed": 6, "finished": True}
    assert state["finalOutput"]["message"] == "processed 6 items"
    events = assert_well_formed(h.bundle(run_id))
    datas = [e["payload"]["data"] for e in events if e["type"] == "update_published"]
    # Six lines in about 0.3 s: the rate limit keeps some back, never the last one.
    assert 2 <= len(datas) <= 6
    assert datas[-1] == {"progress": {"done": 6, "total": 6, "unit": "items"},
                         "message": "last: item-6"}
    dones = [d["progress"]["done"] for d in datas]
    assert dones == sorted(dones) and dones[0] == 1
