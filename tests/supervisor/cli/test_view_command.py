"""``pi-workflows view`` without a terminal or with ``--once``: one snapshot as text.

The real CLI (in process, so its stdout is no terminal) over a project of
real recorded runs: the list, a run's detail with its graph and node
states, the filters, a run named by its hex part, the errors (an unknown
run, a bad state: one line, exit 2), the one line a terminal gets without
the ui extra, and that the text path never imports textual (a fresh
interpreter in which textual cannot be imported).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pi_workflows.supervisor.cli.commands import view

from tests.helpers.cli import CliResult, run_cli
from tests.helpers.engine import Harness
from tests.supervisor.tui.recorded import Recorded, record, shown_states

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def recorded(cli: Harness) -> Recorded:
    return record(cli)


def _view(rec: Recorded, *args: str) -> CliResult:
    return run_cli("view", *args, "--project", str(rec.h.project), cwd=rec.h.root)


def test_without_a_terminal_view_prints_the_run_list(recorded: Recorded) -> None:
    out = _view(recorded)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["RUN", "WORKFLOW", "STATE", "ELAPSED", "PROGRESS"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(rows) == {recorded.shipped, recorded.waiting, recorded.broken}
    assert rows[recorded.shipped][1:3] == ["ship", "completed"]
    assert rows[recorded.broken][1:3] == ["broken", "failed"]
    assert _view(recorded, "--once").stdout == out.stdout


def test_filters_narrow_the_printed_list(recorded: Recorded) -> None:
    failed = _view(recorded, "--state", "failed")
    assert failed.returncode == 0, failed.stderr
    assert [line.split()[0] for line in failed.stdout.splitlines()[1:]] == [recorded.broken]
    check = _view(recorded, "--workflow", "check", "--once")
    assert [line.split()[0] for line in check.stdout.splitlines()[1:]] == [recorded.waiting]
    none = _view(recorded, "--workflow", "nope")
    assert none.returncode == 0 and none.stdout.startswith("no runs match"), none.stdout


def test_view_run_prints_its_detail_with_the_graph_and_steps(recorded: Recorded) -> None:
    hex_part = recorded.broken.rsplit("-", 1)[1]
    out = _view(recorded, hex_part, "--once")
    assert out.returncode == 0 and out.stderr == "", out.stderr
    text = out.stdout
    assert text.startswith(f"{recorded.broken}  broken  failed")
    assert shown_states(text) == {"prep": "done", "explode": "failed"}
    assert "╭" in text  # drawn in boxes
    assert "explode  compute  failed" in text


def test_an_unknown_run_or_state_is_one_line_and_exit_2(recorded: Recorded) -> None:
    unknown = _view(recorded, "deadbeef")
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert unknown.stderr.count("\n") == 1 and "no run deadbeef" in unknown.stderr
    bad = _view(recorded, "--state", "sleepy")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "unknown state 'sleepy'" in bad.stderr


def test_a_terminal_without_the_ui_extra_gets_one_line_and_exit_2(
        recorded: Recorded, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(view, "stdout_is_terminal", lambda: True)
    monkeypatch.setitem(sys.modules, "textual", None)  # import textual raises ImportError
    out = _view(recorded)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [
        "pi-workflows: error: pi-workflows view needs the ui extra: pip install"
        " 'pi-workflows[ui]'"]


PROBE = """
import sys
sys.modules["textual"] = None  # as if the ui extra were not installed
from pi_workflows.supervisor.cli.main import main
code = main(sys.argv[1:])
assert not any(name.startswith("textual") and sys.modules[name] is not None
               for name in sys.modules), "textual was imported"
sys.exit(code)
"""


def test_the_text_path_works_without_textual(recorded: Recorded, tmp_path: Path) -> None:
    env = {**os.environ, "PI_WORKFLOWS_HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, "view", recorded.shipped, "--once", "--project",
         str(recorded.h.project)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{recorded.shipped}  ship  completed")
    assert "build" in proc.stdout


def test_json_prints_the_view_streams_document(recorded: Recorded) -> None:
    import json
    runs = json.loads(_view(recorded, "--json", "--state", "failed").stdout)
    assert runs["kind"] == "runs" and [r["runId"] for r in runs["runs"]] == [recorded.broken]
    one = _view(recorded, recorded.broken.rsplit("-", 1)[1], "--json")
    assert one.returncode == 0 and one.stderr == "", one.stderr
    doc = json.loads(one.stdout)
    assert doc["kind"] == "run" and doc["runId"] == recorded.broken
    assert doc["nodes"] == {"prep": "done", "explode": "failed"}
