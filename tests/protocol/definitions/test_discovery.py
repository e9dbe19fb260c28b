"""Loading workflow files, source identity and project/global discovery."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest
from pi_workflows.protocol.definitions.discovery import (
    Catalog,
    WorkflowLoadError,
    discover,
    discover_for,
    load_workflow_file,
    source_identity,
    workflow_name_for,
)
from pi_workflows.protocol.errors import NotFound, UsageError
from pi_workflows.protocol.settings import load_settings

from tests.helpers.definitions import simple_source, write


def test_load_sets_the_name_from_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "greet.workflow.py", simple_source())
    loaded = load_workflow_file(path)
    assert loaded.workflow.name == "greet" and loaded.name == "greet"
    assert loaded.source.path == os.path.realpath(path)
    assert loaded.source.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert loaded.digest.startswith("sha256:")
    assert not [m for m in sys.modules if m.startswith("_pi_workflow_")]


def test_a_matching_explicit_name_is_fine(tmp_path: Path) -> None:
    path = write(tmp_path / "greet.workflow.py", simple_source(name="greet"))
    assert load_workflow_file(path).name == "greet"


def test_name_and_stem_mismatch(tmp_path: Path) -> None:
    path = write(tmp_path / "greet.workflow.py", simple_source(name="hello"))
    with pytest.raises(WorkflowLoadError) as caught:
        load_workflow_file(path)
    assert caught.value.reason == (
        "workflow name 'hello' does not match the file name 'greet'; rename the file to"
        " hello.workflow.py or drop name=")
    assert caught.value.path == str(path)
    assert isinstance(caught.value, UsageError) and caught.value.code == "workflow_invalid"
    assert str(caught.value).startswith(f"{path}: workflow name 'hello'")


def test_a_reserved_or_invalid_file_name(tmp_path: Path) -> None:
    for stem, reason in (("run", "is reserved"), ("two words", "is invalid")):
        path = write(tmp_path / f"{stem}.workflow.py", simple_source())
        with pytest.raises(WorkflowLoadError, match=reason):
            load_workflow_file(path)


def test_digest_is_stable_across_loads_and_follows_edits(tmp_path: Path) -> None:
    path = write(tmp_path / "greet.workflow.py", simple_source())
    first, second = load_workflow_file(path), load_workflow_file(path)
    assert first.workflow is not second.workflow
    assert first.digest == second.digest and first.source == second.source
    write(path, simple_source(description="changed"))
    third = load_workflow_file(path)
    assert third.digest != first.digest and third.source.sha256 != first.source.sha256


def test_only_a_comment_changed_keeps_the_digest(tmp_path: Path) -> None:
    path = write(tmp_path / "greet.workflow.py", simple_source())
    before = load_workflow_file(path)
    path.write_text(path.read_text() + "\n# a comment\n")
    after = load_workflow_file(path)
    assert after.digest == before.digest and after.source.sha256 != before.source.sha256


def test_no_workflow_in_the_module(tmp_path: Path) -> None:
    path = write(tmp_path / "empty.workflow.py", "x = 1\n")
    with pytest.raises(WorkflowLoadError) as caught:
        load_workflow_file(path)
    assert caught.value.reason == (
        "the file defines no workflow; assign `workflow = define_workflow(...)` at module level")


def test_two_workflows_in_the_module(tmp_path: Path) -> None:
    body = simple_source() + "\nother = define_workflow(start_at='a', nodes=[compute('a', len)])\n"
    body += "alias = workflow\n"  # the same object twice counts once
    path = write(tmp_path / "two.workflow.py", body)
    with pytest.raises(WorkflowLoadError) as caught:
        load_workflow_file(path)
    assert caught.value.reason == (
        "the file defines 2 workflows (workflow, other); a workflow file defines exactly one")


def test_a_child_to_include_beside_its_parent_is_told_where_it_goes(tmp_path: Path) -> None:
    body = simple_source() + (
        "\nCHILD = define_workflow(start_at='a', nodes=[compute('a', len)],"
        " exits={'done': 'a'})\n")
    path = write(tmp_path / "two.workflow.py", body)
    with pytest.raises(WorkflowLoadError) as caught:
        load_workflow_file(path)
    assert caught.value.reason == (
        "the file defines 2 workflows (workflow, CHILD); a workflow file defines exactly one;"
        " build a workflow you include inside a function (def child(): return"
        " define_workflow(...)), or put it in a file of its own and include that file")


def test_import_error_carries_the_path_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "boom.workflow.py", "import os\nraise RuntimeError('kaput')\n")
    with pytest.raises(WorkflowLoadError) as caught:
        load_workflow_file(path)
    assert caught.value.message == f"{path}: import failed at line 2: RuntimeError: kaput"
    assert caught.value.debug_traceback and "RuntimeError: kaput" in caught.value.debug_traceback
    assert "\n" not in caught.value.message


def test_missing_module_and_syntax_error(tmp_path: Path) -> None:
    path = write(tmp_path / "dep.workflow.py", "import no_such_module_here\n")
    with pytest.raises(WorkflowLoadError, match="ModuleNotFoundError: No module named"):
        load_workflow_file(path)
    path = write(tmp_path / "syntax.workflow.py", "x = (\n")
    with pytest.raises(WorkflowLoadError, match=r"syntax\.workflow\.py: syntax error at line 1"):
        load_workflow_file(path)
    path = write(tmp_path / "exits.workflow.py", "import sys\nsys.exit(3)\n")
    with pytest.raises(WorkflowLoadError, match="SystemExit: 3"):
        load_workflow_file(path)


def test_invalid_definition_in_a_file_lists_every_problem(tmp_path: Path) -> None:
    body = """
    from pi_workflows import compute, define_workflow, edge

    workflow = define_workflow(
        start_at="a",
        nodes=[compute("a", 1), compute("b", len)],
        edges=[edge("a", "zz")],
    )
    """
    path = write(tmp_path / "bad.workflow.py", body)
    with pytest.raises(WorkflowLoadError) as caught:
        load_workflow_file(path)
    assert caught.value.problems == [
        "compute node 'a': fn must be a callable taking ctx, got int",
        "edge 'a' -> 'zz': target 'zz' is not a node",
        "node 'b' is not reachable from start node 'a'",
    ]
    assert caught.value.reason.startswith("invalid workflow definition (line 3): 3 problems:")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(WorkflowLoadError, match="file not found"):
        load_workflow_file(tmp_path / "nope.workflow.py")


def test_loading_the_same_stem_twice_does_not_clash(tmp_path: Path) -> None:
    a = write(tmp_path / "a" / "same.workflow.py", simple_source(description="one"))
    b = write(tmp_path / "b" / "same.workflow.py", simple_source(description="two"))
    first, second = load_workflow_file(a), load_workflow_file(b)
    assert first.workflow.description == "one" and second.workflow.description == "two"
    fn_a = first.workflow.nodes["a"].fn  # type: ignore[union-attr]
    assert fn_a(None) == {"n": 1}  # functions keep working after the module is unregistered


def test_source_identity_hashes_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "x.workflow.py"
    path.write_bytes(b"# \xc3\xa9\r\n")
    link = tmp_path / "link.workflow.py"
    link.symlink_to(path)
    ident = source_identity(link)
    assert ident.path == os.path.realpath(path)
    assert ident.sha256 == hashlib.sha256(b"# \xc3\xa9\r\n").hexdigest()


def test_workflow_name_for() -> None:
    assert workflow_name_for(Path("/x/deploy.workflow.py")) == "deploy"
    assert workflow_name_for(Path("plain.py")) == "plain"


def _layout(tmp_path: Path) -> tuple[Path, Path]:
    project, shared = tmp_path / "project", tmp_path / "global"
    local = project / ".pi" / "workflows"
    write(local / "both.workflow.py", simple_source(description="project copy"))
    write(local / "mine.workflow.py", simple_source(description="only here"))
    write(local / "broken.workflow.py", "raise ValueError('nope')\n")
    write(shared / "both.workflow.py", simple_source(description="global copy"))
    write(shared / "shared.workflow.py", simple_source(description="from global"))
    write(shared / "broken2.workflow.py", "workflow = 1\n")
    write(shared / "ignored.py", simple_source())
    return project, shared


def test_discovery_shadowing_and_error_entries(tmp_path: Path) -> None:
    project, shared = _layout(tmp_path)
    catalog = discover(project, shared)
    rows = [(e.name, e.scope, e.shadowed, e.loaded is not None) for e in catalog.entries]
    assert rows == [
        ("both", "project", False, True),
        ("both", "global", True, True),
        ("broken", "project", False, False),
        ("broken2", "global", False, False),
        ("mine", "project", False, True),
        ("shared", "global", False, True),
    ]
    assert catalog.get("both").workflow.description == "project copy"
    assert catalog.get("shared").workflow.description == "from global"
    with pytest.raises(WorkflowLoadError, match="ValueError: nope"):
        catalog.get("broken")
    with pytest.raises(NotFound) as caught:
        catalog.get("ignored")
    assert caught.value.code == "workflow_not_found"


def test_a_broken_project_file_still_shadows_the_global_one(tmp_path: Path) -> None:
    project, shared = _layout(tmp_path)
    write(project / ".pi" / "workflows" / "shared.workflow.py", "raise KeyError('x')\n")
    catalog = discover(project, shared)
    with pytest.raises(WorkflowLoadError, match="KeyError"):
        catalog.get("shared")


def test_catalog_json(tmp_path: Path) -> None:
    project, shared = _layout(tmp_path)
    data = discover(project, shared).as_json()
    assert [w["name"] for w in data["workflows"]] == ["both", "both", "mine", "shared"]
    first = data["workflows"][0]
    assert set(first) == {"name", "path", "scope", "shadowed", "digest", "sourceSha256",
                          "description"}
    assert [e["name"] for e in data["errors"]] == ["broken", "broken2"]
    assert set(data["errors"][0]) == {"name", "path", "scope", "shadowed", "error", "problems"}


def test_discovery_of_missing_directories_is_empty(tmp_path: Path) -> None:
    catalog = discover(tmp_path, tmp_path / "nowhere")
    assert catalog == Catalog(str(tmp_path / ".pi" / "workflows"), str(tmp_path / "nowhere"), ())


def test_discovery_from_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    write(project / "flows" / "custom.workflow.py", simple_source())
    home = Path(os.environ["PI_WORKFLOWS_HOME"])
    write(home / "homeflow.workflow.py", simple_source())
    monkeypatch.setenv("PI_WORKFLOWS_PROJECT_WORKFLOWS_DIR", "flows")
    assert discover_for(load_settings(), project).names() == ["custom", "homeflow"]
    monkeypatch.setenv("PI_WORKFLOWS_GLOBAL_WORKFLOWS_DIR", str(tmp_path / "elsewhere"))
    assert discover_for(load_settings(), project).names() == ["custom"]
