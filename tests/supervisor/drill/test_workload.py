"""The drill's workload: every workflow it writes is valid, and the composed graph,
the human decision and the progress updates are in what it launches (issue 23)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pi_workflows.protocol.definitions.decisions import HumanDecisionNode
from pi_workflows.protocol.definitions.discovery import load_workflow_file
from pi_workflows.protocol.definitions.graph import MountNode
from pi_workflows.supervisor.drill.workload import DETACHED, WORKFLOWS


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    out = tmp_path / ".pi" / "workflows"
    out.mkdir(parents=True)
    for name, text in WORKFLOWS.items():
        (out / f"{name}.workflow.py").write_text(text)
    return out


@pytest.mark.parametrize("name", sorted(WORKFLOWS))
def test_every_workflow_of_the_drill_loads(folder: Path, name: str) -> None:
    # A broken one is only a refused launch in the report: no violation would say so.
    assert load_workflow_file(folder / f"{name}.workflow.py").name == name


def test_the_new_vocabulary_is_in_what_the_drill_launches(folder: Path) -> None:
    assert {"composed", "decide", "progress"} <= set(DETACHED)
    composed = load_workflow_file(folder / "composed.workflow.py").workflow
    assert any(isinstance(n, MountNode) for n in composed.nodes.values())
    assert {"part/fx", "fx"} <= set(composed.nodes)  # an effect inside the mount too
    decide = load_workflow_file(folder / "decide.workflow.py").workflow
    ask = decide.nodes["ask"]
    assert isinstance(ask, HumanDecisionNode) and ask.on_timeout == "no"
    progress = load_workflow_file(folder / "progress.workflow.py").workflow
    assert progress.nodes["lines"].updates is not None  # type: ignore[union-attr]
