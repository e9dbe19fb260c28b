"""The `workflows` and `validate` commands, run through the CLI's entry point."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.helpers.cli import run_cli
from tests.helpers.definitions import simple_source, write


def test_validate_ok(tmp_path: Path) -> None:
    path = write(tmp_path / "greet.workflow.py", simple_source())
    out = run_cli("validate", str(path))
    assert out.returncode == 0, out.stderr
    name, digest = out.stdout.split()[1:]
    assert out.stdout.startswith("ok greet sha256:") and name == "greet"
    as_json = run_cli("validate", str(path), "--json")
    data = json.loads(as_json.stdout)
    assert data["ok"] is True and data["digest"] == digest and data["name"] == "greet"


def test_validate_prints_one_line_per_problem(tmp_path: Path) -> None:
    body = """
    from pi_workflows import compute, define_workflow, edge, notify

    workflow = define_workflow(
        start_at="a",
        max_steps=0,
        nodes=[compute("a", 1), notify("b", "x", kind="loud")],
        edges=[edge("a", "b"), edge("b", "zz")],
    )
    """
    path = write(tmp_path / "bad.workflow.py", body)
    out = run_cli("validate", str(path))
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.splitlines() == [
        f"{path}: compute node 'a': fn must be a callable taking ctx, got int",
        f"{path}: notify node 'b': kind must be 'progress' or 'final', got 'loud'",
        f"{path}: edge 'b' -> 'zz': target 'zz' is not a node",
        f"{path}: max_steps must be a positive integer, got 0",
    ]
    data = json.loads(run_cli("validate", str(path), "--json").stdout)
    assert data["ok"] is False and len(data["problems"]) == 4


def test_validate_import_error_is_one_line_without_traceback(tmp_path: Path) -> None:
    path = write(tmp_path / "boom.workflow.py", "raise RuntimeError('kaput')\n")
    out = run_cli("validate", str(path))
    assert out.returncode == 2
    assert out.stderr == f"{path}: import failed at line 1: RuntimeError: kaput\n"
    debug = run_cli("--debug", "validate", str(path))
    assert debug.returncode == 2 and "Traceback" in debug.stderr


def test_validate_missing_file(tmp_path: Path) -> None:
    out = run_cli("validate", str(tmp_path / "nope.workflow.py"))
    assert out.returncode == 2
    assert out.stderr == f"{tmp_path / 'nope.workflow.py'}: file not found\n"


def test_validate_by_name_finds_the_projects_file_or_says_where_it_looked(
        tmp_path: Path) -> None:
    local = tmp_path / ".pi" / "workflows"
    write(local / "greet.workflow.py", simple_source())
    out = run_cli("validate", "greet", "--project", str(tmp_path))
    assert out.returncode == 0 and out.stdout.startswith("ok greet sha256:"), out.stderr
    out = run_cli("validate", "nosuch", "--project", str(tmp_path))
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "no workflow named 'nosuch'" in out.stderr and str(local.resolve()) in out.stderr
    assert "file not found" not in out.stderr


def test_workflows_json_lists_definitions_and_errors(tmp_path: Path) -> None:
    project = tmp_path / "project"
    local = project / ".pi" / "workflows"
    write(local / "greet.workflow.py", simple_source(description="project greet"))
    write(local / "broken.workflow.py", "raise ValueError('nope')\n")
    home = Path(os.environ["PI_WORKFLOWS_HOME"])
    write(home / "greet.workflow.py", simple_source(description="global greet"))
    write(home / "tidy.workflow.py", simple_source(description="global tidy"))
    out = run_cli("workflows", "--project", str(project), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["projectDir"] == str(local.resolve())
    assert data["globalDir"] == str(home)
    rows = [(w["name"], w["scope"], w["shadowed"], w["description"]) for w in data["workflows"]]
    assert rows == [("greet", "project", False, "project greet"),
                    ("greet", "global", True, "global greet"),
                    ("tidy", "global", False, "global tidy")]
    assert all(w["digest"].startswith("sha256:") for w in data["workflows"])
    assert data["errors"] == [{
        "name": "broken", "scope": "project", "shadowed": False,
        "path": str(local.resolve() / "broken.workflow.py"),
        "error": "import failed at line 1: ValueError: nope",
        "problems": ["import failed at line 1: ValueError: nope"],
    }]


def test_workflows_text_output(tmp_path: Path) -> None:
    project = tmp_path / "project"
    write(project / ".pi" / "workflows" / "greet.workflow.py", simple_source())
    write(project / ".pi" / "workflows" / "broken.workflow.py", "raise ValueError('nope')\n")
    out = run_cli("workflows", "--project", str(project))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("greet  project  ")
    assert lines[1].strip() == "a test workflow"
    assert lines[2].startswith("error: broken (project) ")
    assert lines[2].endswith("import failed at line 1: ValueError: nope")


def test_workflows_in_an_empty_project(tmp_path: Path) -> None:
    out = run_cli("workflows", "--project", str(tmp_path))
    assert out.returncode == 0
    assert out.stdout.startswith("no workflows")
    assert json.loads(run_cli("workflows", "--project", str(tmp_path), "--json").stdout)[
        "workflows"] == []
