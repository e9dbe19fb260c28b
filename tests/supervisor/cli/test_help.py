"""The CLI's conventions: -h, --version, shell completion, and help written for people."""

from __future__ import annotations

import os
import re
from importlib.metadata import version
from pathlib import Path

import pytest
import typer
from pi_workflows.supervisor.cli.app import app, main

from tests.helpers.cli import CliResult, run_cli

pytestmark = pytest.mark.timeout(60)

COMMANDS = sorted(getattr(typer.main.get_command(app), "commands", {}))
# What typer shows when a parameter has no metavar: Python types and {name}.
INTERNAL = re.compile(r"<(str|int|float|path|bool|list\[[^\]]*\])[^>]*>|\{[a-z_]+\}|\bNone\b")


def _help(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main([*args]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_is_for_people_with_an_example(
        capsys: pytest.CaptureFixture[str], command: str) -> None:
    text = _help(capsys, command, "--help")
    assert not INTERNAL.search(text), INTERNAL.search(text)
    assert f"Example: pi-workflows {command}" in text
    assert _help(capsys, command, "-h") == text


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_that_reads_a_project_takes_project(
        capsys: pytest.CaptureFixture[str], command: str) -> None:
    assert "--project DIR" in _help(capsys, command, "--help")


def test_the_top_level_help_lists_version_completion_and_short_help(
        capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, "-h")
    assert not INTERNAL.search(text)
    for option in ("--version", "--install-completion", "--show-completion", "-h, --help"):
        assert option in text
    assert all(command in text for command in COMMANDS)


def _cli(*args: str, home: Path, **env: str) -> CliResult:
    # HOME is a temporary directory: completion must never touch the real one.
    return run_cli(*args, env={**os.environ, "HOME": str(home), **env})


def test_version_prints_the_installed_version(tmp_path: Path) -> None:
    proc = _cli("--version", home=tmp_path)
    assert proc.returncode == 0 and proc.stdout == f"pi-workflows {version('pi-workflows')}\n"


def test_completion_is_shown_installed_into_home_and_answers(tmp_path: Path) -> None:
    shown = _cli("--show-completion", "bash", home=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "_PI_WORKFLOWS_COMPLETE=complete_bash" in shown.stdout
    assert "complete -o default -F _pi_workflows_completion pi-workflows" in shown.stdout
    assert list(tmp_path.iterdir()) == []  # showing installs nothing
    installed = _cli("--install-completion", "bash", home=tmp_path)
    assert installed.returncode == 0, installed.stderr
    script = tmp_path / ".bash_completions" / "pi-workflows.sh"
    assert script.is_file() and str(script) in (tmp_path / ".bashrc").read_text()
    # What the shell runs on TAB: the commands that start with the word typed.
    answer = _cli(home=tmp_path, _PI_WORKFLOWS_COMPLETE="complete_bash",
                  COMP_WORDS="pi-workflows sta", COMP_CWORD="1")
    assert answer.returncode == 0 and sorted(answer.stdout.split()) == ["start", "status"]
