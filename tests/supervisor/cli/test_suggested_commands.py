"""A command a refusal suggests works when pasted, also from outside the project.

The CLI is called in process from the directory above the project, so a
suggestion is only right with its ``--project``; each is run as printed.
"""

from __future__ import annotations

import re
import shlex

import pytest
from pi_workflows.protocol.store import Store

from tests.helpers.cli import CliResult, run_cli
from tests.helpers.engine import Harness
from tests.helpers.store import put_in_state

pytestmark = pytest.mark.timeout(60)

CHECK = """
workflow = define_workflow(
    start_at="draft",
    nodes=[
        compute("draft", lambda ctx: {"plan": "p"}),
        checkpoint("approve", summary=lambda ctx: "approve the plan"),
    ],
    edges=[edge("draft", "approve")],
)
"""
SUGGESTED = re.compile(r"`(pi-workflows [^`]+)`")


def _refused(h: Harness, *args: str) -> str:
    done = run_cli(*args, "--project", str(h.project), cwd=h.root)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done
    return done.stderr


def _pasted(h: Harness, message: str, *fill: tuple[str, str]) -> CliResult:
    (command,) = SUGGESTED.findall(message)
    for blank, value in fill:
        command = command.replace(blank, value)
    words = shlex.split(command)
    assert words[-2:] == ["--project", str(h.project)], command
    return run_cli(*words[1:], cwd=h.root)


def _waiting(h: Harness) -> str:
    h.write("check", CHECK)
    run_id = h.launch("check", {})
    assert h.execute(run_id).outcome == "waiting"
    return run_id


def test_fork_of_a_waiting_run_suggests_an_answer_with_its_project(cli: Harness) -> None:
    run_id = _waiting(cli)
    refused = _refused(cli, "fork", run_id)
    assert _pasted(cli, refused, ('"your answer"', "yes")).returncode == 0


def test_a_second_answer_points_at_the_continuations_status_with_its_project(
        cli: Harness) -> None:
    run_id = _waiting(cli)
    assert run_cli("answer", run_id, "yes", "--project", str(cli.project)).returncode == 0
    refused = _refused(cli, "answer", run_id, "again")
    shown = _pasted(cli, refused)
    assert shown.returncode == 0 and "queued" in shown.stdout


def test_chat_of_a_running_run_suggests_watch_with_its_project(cli: Harness) -> None:
    run_id = "20990101T000000Z-demo-0000abcd"
    with Store(cli.store_path) as store:
        put_in_state(store, run_id, "running")  # pasting watch would follow it forever
    refused = _refused(cli, "chat", run_id)
    (command,) = SUGGESTED.findall(refused)
    assert shlex.split(command)[1:3] == ["watch", run_id]
    assert shlex.split(command)[-2:] == ["--project", str(cli.project)]


def test_an_unknown_run_suggests_the_listing_of_its_project(cli: Harness) -> None:
    _waiting(cli)
    refused = _refused(cli, "fork", "feedf00d")
    listed = _pasted(cli, refused)
    assert listed.returncode == 0 and "check" in listed.stdout


def test_queueing_with_no_host_names_the_host_command_of_its_project(cli: Harness) -> None:
    run_id = _waiting(cli)
    answered = run_cli("answer", run_id, "yes", "--project", str(cli.project), cwd=cli.root)
    assert answered.returncode == 0
    (command,) = SUGGESTED.findall(answered.stderr)
    assert shlex.split(command)[1:] == ["host", "--background", "--project", str(cli.project)]


def test_validate_of_an_unknown_name_suggests_the_listing_of_its_project(cli: Harness) -> None:
    cli.write("check", CHECK)
    refused = _refused(cli, "validate", "chekc")
    listed = _pasted(cli, refused)
    assert listed.returncode == 0 and "check" in listed.stdout
