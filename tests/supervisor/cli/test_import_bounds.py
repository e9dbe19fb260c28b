"""A workflow file that misbehaves at import cannot hang or corrupt the commands."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers.cli import CliResult, run_cli
from tests.helpers.processes import alive
from tests.helpers.waiting import poll

pytestmark = pytest.mark.timeout(60)

GOOD = ("from pi_workflows import compute, define_workflow\n"
        "workflow = define_workflow(start_at='a', nodes=[compute('a', lambda ctx: 1)])\n")


def _project(tmp_path: Path, **files: str) -> tuple[Path, dict[str, str]]:
    flows = tmp_path / "proj" / ".pi" / "workflows"
    flows.mkdir(parents=True)
    for name, body in files.items():
        (flows / f"{name}.workflow.py").write_text(body)
    env = {**os.environ, "PI_WORKFLOWS_HOME": str(tmp_path / "home"),
           "PI_WORKFLOWS_LOAD_TIMEOUT_S": "1"}
    return tmp_path / "proj", env


def _cli(project: Path, env: dict[str, str], *args: str) -> CliResult:
    return run_cli(*args, "--project", str(project), env=env)


def test_run_imports_only_the_named_file(tmp_path: Path) -> None:
    project, env = _project(tmp_path, good=GOOD, hangs="while True:\n    pass\n",
                            exits="import os\nos._exit(3)\n")
    out = _cli(project, env, "run", "good", "--detach", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["state"] == "queued"


def test_a_file_that_hangs_at_import_is_one_bounded_error(tmp_path: Path) -> None:
    project, env = _project(tmp_path, good=GOOD, hangs="while True:\n    pass\n")
    out = _cli(project, env, "run", "hangs", "--detach")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "took longer than 1 s" in out.stderr
    listed = _cli(project, env, "workflows", "--json")
    data = json.loads(listed.stdout)  # the other file still lists, within the bound
    assert [w["name"] for w in data["workflows"]] == ["good"]
    assert [e["name"] for e in data["errors"]] == ["hangs"]


def test_a_print_at_import_does_not_corrupt_json_output(tmp_path: Path) -> None:
    project, env = _project(tmp_path, chatty="print('hello from import')\n" + GOOD)
    out = _cli(project, env, "run", "chatty", "--detach", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["workflow"] == "chatty"
    assert "hello from import" in out.stderr


def test_an_unknown_name_lists_the_others_without_importing_them(tmp_path: Path) -> None:
    project, env = _project(tmp_path, good=GOOD, exits="import os\nos._exit(3)\n")
    out = _cli(project, env, "run", "nope", "--detach")
    assert out.returncode == 2 and "known: exits, good" in out.stderr


@pytest.mark.parametrize("body", ["import os\nos._exit(3)\n",
                                  "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"])
def test_a_file_that_ends_the_process_at_import_is_one_error_and_the_rest_lists(
        tmp_path: Path, body: str) -> None:
    project, env = _project(tmp_path, good=GOOD, exits=body)
    listed = _cli(project, env, "workflows", "--json")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert [w["name"] for w in data["workflows"]] == ["good"]
    [error] = data["errors"]
    assert error["name"] == "exits" and "ended the process" in error["error"]
    human = _cli(project, env, "workflows")
    assert human.returncode == 0 and human.stdout.splitlines()[0].startswith("good ")
    assert "error: exits (project)" in human.stdout
    checked = run_cli("validate", str(project / ".pi/workflows/exits.workflow.py"), env=env)
    assert checked.returncode == 2 and "ended the process" in checked.stderr
    assert checked.stderr.count("\n") == 1


def test_a_process_started_at_import_neither_delays_the_listing_nor_outlives_it(
        tmp_path: Path) -> None:
    spawner = ("import pathlib, subprocess\n"
               "p = subprocess.Popen(['sleep', '300'])\n"
               "pathlib.Path(__file__).with_name('helper.pid').write_text(str(p.pid))\n" + GOOD)
    project, env = _project(tmp_path, spawner=spawner)
    listed = _cli(project, env, "workflows", "--json")  # the load bound is 1 s here
    data = json.loads(listed.stdout)
    assert [w["name"] for w in data["workflows"]] == ["spawner"], data
    pid = int((project / ".pi" / "workflows" / "helper.pid").read_text())
    poll(lambda: not alive(pid), 10)
    assert not alive(pid)
