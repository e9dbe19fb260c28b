"""The shipped examples load, validate and route the way their docs say."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from pi_workflows.protocol.definitions.discovery import load_workflow_file
from pi_workflows.protocol.definitions.graph import definition_digest
from pi_workflows.protocol.definitions.routing import next_node, routes_failures
from pi_workflows.protocol.definitions.values import apply_input

from tests.helpers.cli import run_cli
from tests.helpers.definitions import make_ctx

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
OK = {"outcome": "ok", "errorCode": None, "error": None}


NAMES = sorted(p.name.removesuffix(".workflow.py") for p in EXAMPLES.glob("*.workflow.py"))
DOCS = EXAMPLES.parent / "docs" / "workflows.md"


def test_every_feature_of_the_vocabulary_has_its_example() -> None:
    assert set(NAMES) >= {"pipeline", "review", "summarize", "compose", "review-step",
                          "triage", "approve", "progress", "batch", "todos"}


@pytest.mark.parametrize("name", NAMES)
def test_example_loads(name: str) -> None:
    loaded = load_workflow_file(EXAMPLES / f"{name}.workflow.py")
    assert loaded.name == name
    assert loaded.digest == definition_digest(loaded.workflow)
    assert loaded.workflow.description


@pytest.mark.parametrize("name", NAMES)
def test_example_is_in_the_examples_list_of_the_docs(name: str) -> None:
    examples = DOCS.read_text().split("\n## Examples\n", 1)[1].split("\n## ", 1)[0]
    assert f"- `{name}.workflow.py`" in examples


def test_todos_counts_and_presents() -> None:
    wf = load_workflow_file(EXAMPLES / "todos.workflow.py").workflow
    node = wf.nodes["count"]
    ctx = make_ctx(input={"dir": "src"})
    raw = {"exitCode": 0, "stdout": "src/a.py:2\nsrc/b.py:1\nsrc/c.py:0\n", "stderr": "",
           "truncated": False}
    found = node.parse(raw, ctx)  # type: ignore[union-attr, misc]
    assert found == {"dir": "src", "total": 3, "files": 2,
                     "top": [{"path": "src/a.py", "lines": 2}, {"path": "src/b.py", "lines": 1}]}
    prompt = wf.presentation_prompt({"outputs": {"count": found}})  # type: ignore[operator]
    assert "3 TODO or FIXME lines in 2 files" in prompt
    none = node.parse({**raw, "exitCode": 1, "stdout": ""}, ctx)  # type: ignore[union-attr, misc]
    assert "no TODO or FIXME" in wf.presentation_prompt({"outputs": {"count": none}})  # type: ignore[operator]
    with pytest.raises(ValueError, match="grep could not search 'src'"):
        node.parse({**raw, "exitCode": 2, "stderr": "grep: src: gone\n"}, ctx)  # type: ignore[union-attr, misc]


def test_pipeline_routes_failures() -> None:
    wf = load_workflow_file(EXAMPLES / "pipeline.workflow.py").workflow
    assert apply_input(wf, {"task": "src"}) == {"dir": "src"}
    assert apply_input(wf, {}) == {"dir": "."}
    assert routes_failures(wf, "count")
    assert next_node(wf, "count", {"exitCode": 0, "stdout": "3\n"}, {**OK, "exitCode": 0}) == (
        "summarize")
    failed = {"outcome": "failed", "errorCode": "shell_spawn_failed", "error": "no dir"}
    assert next_node(wf, "count", None, failed) == "report_failure"
    ctx = make_ctx(input={"dir": "src"}, outputs={"plan": {"dir": "src", "pattern": "*.py"}})
    assert wf.nodes["count"].command(ctx)[-1] == "*.py"  # type: ignore[union-attr, operator]


def test_review_checkpoint_routes_past_the_answer() -> None:
    wf = load_workflow_file(EXAMPLES / "review.workflow.py").workflow
    assert [n.kind for n in wf.nodes.values()][:3] == ["compute", "checkpoint", "compute"]
    assert next_node(wf, "approve", "yes", OK) == "decide"
    decide = wf.nodes["decide"].fn  # type: ignore[union-attr]
    for answer, approved in (("yes", True), ("no, too long", False), (True, True),
                             ({"approved": False, "comment": "c"}, False),
                             ({"text": "Approve."}, True), ({"task": "nope"}, False)):
        output = decide(make_ctx(outputs={"approve": answer}))
        assert output["approved"] is approved
        assert next_node(wf, "decide", output, OK) == ("publish" if approved else "discarded")


def test_summarize_agent_validation() -> None:
    wf = load_workflow_file(EXAMPLES / "summarize.workflow.py").workflow
    node = wf.nodes["summarize"]
    assert node.kind == "agent" and node.expected_output is not None  # type: ignore[union-attr]
    check = node.validate  # type: ignore[union-attr]
    ctx = make_ctx()
    assert check({"summary": "fine", "bullets": ["a"]}, ctx) is None
    assert check({"summary": "fine", "bullets": list("abcdef")}, ctx) == (
        "give at most 5 bullets, not 6")
    assert apply_input(wf, {"task": "README.md"}) == {"path": "README.md"}
    assert apply_input(wf, "some words to summarize") == {"text": "some words to summarize"}


@pytest.mark.timeout(60)
def test_the_pipeline_example_fails_clearly_on_a_directory_the_project_lacks(
        tmp_path: Path) -> None:
    flows = tmp_path / ".pi" / "workflows"
    flows.mkdir(parents=True)
    shutil.copy(EXAMPLES / "pipeline.workflow.py", flows)
    env = {**os.environ, "PI_WORKFLOWS_PLAIN": "1"}
    missing = run_cli("run", "pipeline", "src", "--project", str(tmp_path), env=env)
    assert missing.returncode == 1
    assert "no directory 'src' in the project" in missing.stdout + missing.stderr
    assert "completed" not in missing.stdout
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("x = 1\ny = 2\n")
    counted = run_cli("run", "pipeline", "src", "--project", str(tmp_path), env=env)
    assert counted.returncode == 0, counted.stdout + counted.stderr
    assert "2 lines of Python under src" in counted.stdout
