"""define_controller, the resource view, status patches and loading controller files."""

from __future__ import annotations

import pytest
from pi_workflows import define_controller
from pi_workflows.protocol.controllers.define import (
    ControllerDefinitionError,
    initial_status,
    patch_problems,
    resource_view,
)
from pi_workflows.protocol.controllers.loading import (
    ControllerLoadError,
    controller_files,
    load_controller_file,
)

pytestmark = pytest.mark.timeout(30)


def _ok(**kw):
    args = {"name": "sync", "initial_status": lambda spec: {}, "reconcile": lambda c, r: None}
    return define_controller(**{**args, **kw})


def test_define_keeps_what_it_was_given():
    c = _ok(timeout=5)
    assert (c.name, c.timeout) == ("sync", 5.0)


@pytest.mark.parametrize(("kw", "words"), [
    ({"name": "Bad_Name"}, "controller name 'Bad_Name' is invalid"),
    ({"name": "9x"}, "is invalid"),
    ({"name": 3}, "must be a string"),
    ({"initial_status": None}, "initial_status must be a function"),
    ({"reconcile": "x"}, "reconcile must be a function"),
    ({"timeout": 0}, "timeout must be more than 0"),
    ({"timeout": float("inf")}, "timeout must be more than 0"),
    ({"timeout": True}, "timeout must be a number"),
])
def test_each_mistake_has_one_message(kw, words):
    with pytest.raises(ControllerDefinitionError) as info:
        _ok(**kw)
    assert len(info.value.problems) == 1
    assert words in info.value.problems[0]


def test_every_mistake_is_reported_together():
    with pytest.raises(ControllerDefinitionError) as info:
        define_controller(name="X", initial_status=1, reconcile=2, timeout=-1)  # type: ignore[arg-type]
    assert len(info.value.problems) == 4


def test_the_resource_is_read_only():
    r = resource_view({"uid": "u", "controller": "c", "key": "k", "resource_version": 3,
                       "generation": 2, "finalizers": ["f"]}, {"a": [1, {"b": 2}]},
                      {"controller_status": {"x": 1}})
    assert r.metadata.finalizers == ("f",) and r.spec["a"][1]["b"] == 2
    with pytest.raises(TypeError):
        r.spec["a"] = 1
    with pytest.raises(TypeError):
        r.status["controller_status"]["x"] = 2
    with pytest.raises(AttributeError):
        r.metadata.generation = 3  # type: ignore[misc]


def test_patch_rules():
    assert patch_problems(None) == [] and patch_problems({"controller_status": {}}) == []
    assert "no field 'spec'" in patch_problems({"spec": 1})[0]
    assert "status must be one of" in patch_problems(
        {"conditions": [{"type": "Ready", "status": "yes"}]})[0]
    assert patch_problems([]) == ["a status patch must be a dict, got list"]


def test_initial_status_is_a_patch_with_ready_unknown():
    c = _ok(initial_status=lambda spec: {"n": spec["n"]})
    patch = initial_status(c, {"n": 1})
    assert patch["controller_status"] == {"n": 1} and patch_problems(patch) == []
    assert patch["conditions"][0]["status"] == "unknown"


SOURCE = """
from pi_workflows import define_controller
controller = define_controller(name={name!r}, initial_status=lambda spec: {{}},
                               reconcile=lambda ctx, r: ctx.settled())
"""


def test_load_a_controller_file(tmp_path):
    path = tmp_path / "sync.controller.py"
    path.write_text(SOURCE.format(name="sync"))
    loaded = load_controller_file(path)
    assert loaded.name == "sync" and len(loaded.sha256) == 64


@pytest.mark.parametrize(("text", "words"), [
    (SOURCE.format(name="other"), "does not match the file name 'sync'"),
    ("x = 1\n", "defines no controller"),
    ("raise RuntimeError('boom')\n", "import failed at line 1: RuntimeError: boom"),
    ("from pi_workflows import define_controller\n"
     "c = define_controller(name='sync', initial_status=1, reconcile=lambda c, r: 0)\n",
     "invalid controller definition (line 2): initial_status must be a function"),
    ("import time\nwhile True: time.sleep(0.01)\n", "took longer than 0.3 s"),
])
def test_a_broken_file_is_one_clear_error(tmp_path, text, words):
    path = tmp_path / "sync.controller.py"
    path.write_text(text)
    with pytest.raises(ControllerLoadError) as info:
        load_controller_file(path, timeout_s=0.3)
    assert words in info.value.reason


def test_files_are_found_beside_workflows_and_shadowed(tmp_path):
    local, shared = tmp_path / "p", tmp_path / "g"
    local.mkdir()
    shared.mkdir()
    (local / "a.controller.py").write_text("")
    (local / "a.workflow.py").write_text("")
    (shared / "a.controller.py").write_text("")
    (shared / "b.controller.py").write_text("")
    found = [(f.name, f.scope, f.shadowed) for f in controller_files(local, shared)]
    assert found == [("a", "project", False), ("a", "global", True), ("b", "global", False)]


def test_the_worked_example_loads():
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "examples" / "filesync.controller.py"
    loaded = load_controller_file(path)
    assert loaded.name == "filesync" and loaded.controller.timeout == 30
