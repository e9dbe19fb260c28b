"""``pi-workflows graph``: a workflow by name or file, a real run with its node states,
every format, a private --output, and each bad input one line with exit 2."""

from __future__ import annotations

import os
import stat
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.helpers.cli import CliResult, run_cli
from tests.helpers.definitions import approve_flow, simple_source, write
from tests.helpers.engine import Harness

pytestmark = pytest.mark.timeout(60)
SVG = "{http://www.w3.org/2000/svg}"
TWO = """
workflow = define_workflow(
    start_at="first",
    nodes=[compute("first", lambda ctx: {"go": "on"}), compute("second", lambda ctx: 2),
           notify("never", "x")],
    edges=[switch("first", "$.go", {"on": "second", "off": "never"})],
)
"""


def _run(h: Harness, *args: str) -> CliResult:
    return run_cli(*args, "--project", str(h.project), cwd=h.root)


def _one_line(result: CliResult) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1
    assert result.stdout == ""
    return result.stderr


def _states(svg: str) -> dict[str, str]:
    root = ET.fromstring(svg)
    return {str(g.get("data-node")): str(g.get("class")) for g in root.iter(f"{SVG}g")
            if g.get("data-node") is not None}


def test_a_workflow_by_name_in_each_format(cli: Harness) -> None:
    cli.write("two", TWO)
    text = _run(cli, "graph", "two")
    assert text.returncode == 0, text.stderr
    assert "first" in text.stdout and "second" in text.stdout and "on" in text.stdout
    assert "╭" in text.stdout and "·" not in text.stdout  # no states for a definition
    svg = _run(cli, "graph", "two", "--format", "svg")
    assert _states(svg.stdout) == {"first": "node", "second": "node", "never": "node"}
    dot = _run(cli, "graph", "two", "--format", "dot")
    assert dot.stdout.startswith('digraph "two" {') and '"first" -> "second" [label="on"];' \
        in dot.stdout


def test_a_workflow_file_by_path(tmp_path: Path) -> None:
    path = write(tmp_path / "greet.workflow.py", simple_source())
    out = run_cli("graph", str(path), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "greet" in out.stdout or "╭" in out.stdout


def test_a_real_run_shows_its_node_states(cli: Harness) -> None:
    cli.write("two", TWO)
    run_id = cli.launch("two", {})
    assert cli.execute(run_id).outcome == "completed"
    svg = _run(cli, "graph", run_id[-8:], "--format", "svg")
    assert svg.returncode == 0, svg.stderr
    assert _states(svg.stdout) == {"first": "node state-done", "second": "node state-done",
                                   "never": "node state-skipped"}
    text = _run(cli, "graph", run_id)
    assert "compute · done" in text.stdout and "notify · skipped" in text.stdout


def test_a_waiting_run(cli: Harness) -> None:
    cli.write("check", approve_flow())
    run_id = cli.launch("check", {})
    assert cli.execute(run_id).outcome == "waiting"
    states = _states(_run(cli, "graph", run_id, "--format", "svg").stdout)
    assert "node state-waiting" in states.values() and "node state-done" in states.values()


def test_output_is_written_private(cli: Harness, tmp_path: Path) -> None:
    cli.write("two", TWO)
    target = tmp_path / "out.svg"
    target.write_text("old")
    os.chmod(target, 0o644)
    out = _run(cli, "graph", "two", "--format", "svg", "--output", str(target))
    assert out.returncode == 0 and out.stdout == ""
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    ET.fromstring(target.read_text())


def test_bad_inputs_are_one_line_and_exit_2(cli: Harness, tmp_path: Path) -> None:
    cli.write("two", TWO)
    assert "no workflow and no run named nothing" in _one_line(_run(cli, "graph", "nothing"))
    assert "--format must be one of text, svg, dot" in _one_line(
        _run(cli, "graph", "two", "--format", "png"))
    assert "cannot write" in _one_line(
        _run(cli, "graph", "two", "--output", str(tmp_path / "no" / "dir" / "x.svg")))
    assert "no workflow file" in _one_line(_run(cli, "graph", str(tmp_path / "x.workflow.py")))
    broken = write(tmp_path / "boom.workflow.py", "raise RuntimeError('kaput')\n")
    line = _one_line(_run(cli, "graph", str(broken)))
    assert str(broken) in line and "kaput" in line
    assert _one_line(_run(cli, "graph", "../../etc/passwd"))
