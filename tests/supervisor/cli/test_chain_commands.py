"""Commands about a run whose checkpoint was answered: each suggestion works when pasted.

A real store and real bundles (``tests.helpers.engine.Harness``), the CLI
called in process from outside the project, so every suggested command
needs its ``--project``.
"""

from __future__ import annotations

import re
import shlex

import pytest

from tests.helpers.cli import CliResult, run_cli
from tests.helpers.definitions import approve_flow
from tests.helpers.engine import Harness

pytestmark = pytest.mark.timeout(60)

CHECK = approve_flow()
# Asks twice: a chain of three runs once both are answered.
TWICE = """
workflow = define_workflow(
    start_at="first",
    nodes=[
        checkpoint("first", summary=lambda ctx: "first?"),
        checkpoint("second", summary=lambda ctx: "second?"),
        compute("done", lambda ctx: {"both": [ctx.outputs["first"], ctx.outputs["second"]]}),
    ],
    edges=[edge("first", "second"), edge("second", "done")],
)
"""
SUGGESTED = re.compile(r"`(pi-workflows [^`]+)`")


def _run(h: Harness, *args: str) -> CliResult:
    return run_cli(*args, "--project", str(h.project), cwd=h.root)


def _pasted(h: Harness, message: str) -> CliResult:
    (command,) = SUGGESTED.findall(message)
    words = shlex.split(command)[1:]
    assert words[-2:] == ["--project", str(h.project)]  # named from outside the project
    return run_cli(*words, cwd=h.root)


def _one_line(result: CliResult) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1
    return result.stderr


def _answered(h: Harness, body: str = CHECK) -> tuple[str, str]:
    h.write("check", body)
    parent = h.launch("check", {})
    assert h.execute(parent).outcome == "waiting"
    return parent, h.answer(parent, "yes")


def test_cancel_of_an_answered_run_names_its_queued_continuation_and_that_cancel_works(
        cli: Harness) -> None:
    parent, child = _answered(cli)
    refused = _one_line(_run(cli, "cancel", parent))
    assert f"goes on as run {child}" in refused
    pasted = _pasted(cli, refused)
    assert pasted.returncode == 0 and pasted.stdout.strip() == f"{child}: cancelled"


def test_cancel_of_an_answered_run_whose_chain_ended_suggests_no_cancel_that_fails(
        cli: Harness) -> None:
    parent, child = _answered(cli)
    assert cli.execute(child).outcome == "completed"
    refused = _one_line(_run(cli, "cancel", parent))
    assert f"goes on as run {child}" in refused and "nothing to cancel" in refused
    assert "pi-workflows cancel" not in refused  # cancelling the completed run fails too


def test_fork_and_cancel_of_a_chain_of_answers_name_its_live_end(cli: Harness) -> None:
    root, middle = _answered(cli, TWICE)
    assert cli.execute(middle).outcome == "waiting"
    end = cli.answer(middle, "again")
    refused = _one_line(_run(cli, "cancel", root))
    assert f"its chain goes on as run {end}" in refused
    assert cli.execute(end).outcome == "completed"
    refused = _one_line(_run(cli, "fork", root))
    assert f"its chain goes on as run {end}" in refused
    # A completed run forks only from a named node: the suggestion says so.
    (command,) = SUGGESTED.findall(refused)
    assert f"fork {end} --from NODE" in command
    forked = run_cli(*shlex.split(command.replace("NODE", "done"))[1:], cwd=cli.root)
    assert forked.returncode == 0, forked.stderr
    assert cli.row(forked.stdout.strip()).forked_from == end


def test_fork_of_an_answered_run_whose_continuation_waits_suggests_answering_it(
        cli: Harness) -> None:
    root, middle = _answered(cli, TWICE)
    assert cli.execute(middle).outcome == "waiting"
    refused = _one_line(_run(cli, "fork", root))
    (command,) = SUGGESTED.findall(refused)
    assert command.startswith(f'pi-workflows answer {middle} "your answer"')
    words = shlex.split(command.replace('"your answer"', "fine"))[1:]
    answered = run_cli(*words, cwd=cli.root)
    assert answered.returncode == 0, answered.stderr
