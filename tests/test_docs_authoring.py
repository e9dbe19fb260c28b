"""The docs against the code: docs/workflows.md's one import names every
constructor ``pi_workflows`` exports, ``define_workflow``'s documented
signature and field table name every parameter it takes, and docs/cli.md's
``logs --json`` step object has every key a step has."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pi_workflows
import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "workflows.md"
# Exported for tools and tests, not for writing a workflow.
NOT_AUTHORING = {"__version__", "DefinitionError", "RunInfo", "Workflow",
                 "definition_digest", "snapshot"}
# A controller's names: docs/controllers.md teaches them; workflows.md points there.
CONTROLLER = {"Controller", "EffectRejected", "define_controller"}


@pytest.mark.timeout(20)
def test_the_one_import_names_every_authoring_name() -> None:
    doc = DOC.read_text()
    start = doc.index("Everything an author needs comes from one import:")
    block = doc[doc.index("from pi_workflows import (", start):]
    block = block[:block.index(")")]
    named = set(re.findall(r"\b([A-Za-z_]\w*)\b", block)) - {"from", "pi_workflows", "import"}
    assert named <= set(pi_workflows.__all__)
    assert set(pi_workflows.__all__) - NOT_AUTHORING - CONTROLLER - named == set()
    controllers = (DOC.parent / "controllers.md").read_text()
    assert all(name in controllers for name in CONTROLLER - {"Controller"})


@pytest.mark.timeout(20)
def test_define_workflow_documents_every_parameter() -> None:
    doc = DOC.read_text()
    section = doc[doc.index("## The workflow"):doc.index("## Nodes")]
    signature = section[section.index("define_workflow("):section.index(")\n```")]
    table = {m for m in re.findall(r"^\| `(\w+)` \|", section, re.M)}
    for name in inspect.signature(pi_workflows.define_workflow).parameters:
        assert re.search(rf"\b{name}\b", signature), f"{name} missing from the signature"
        assert name in table, f"{name} missing from the field table"


@pytest.mark.timeout(20)
def test_the_logs_step_object_in_cli_md_has_every_key() -> None:
    from pi_workflows.supervisor.views.steplogs import StepLog

    doc = (DOC.parent / "cli.md").read_text()
    start = doc.index("a step object is")
    shape = doc[start:doc.index("}`", start)]
    documented = re.findall(r'"(\w+)"', shape)
    assert documented == list(StepLog("n", "n-1", 1, "shell", 0).as_json())
