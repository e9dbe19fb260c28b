"""The command table (``protocol.commands``) and the command modules agree.

Every entry names a module under ``supervisor.cli.commands`` that defines a
command of that name, and each module defines exactly its entries: nothing
is registered anywhere else, so a command missing from the table could not
be run, listed or reserved as a word.
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from pathlib import Path

import pytest
import typer
from pi_workflows.protocol.commands import COMMANDS

COMMANDS_DIR = Path(__file__).resolve().parents[2] / "supervisor" / "cli" / "commands"
PACKAGE = "pi_workflows.supervisor.cli.commands"


def _by_module() -> dict[str, set[str]]:
    names: dict[str, set[str]] = defaultdict(set)
    for entry in COMMANDS:
        names[entry.module].add(entry.name)
    return dict(names)


def _defined(module: str) -> dict[str, object]:
    """The click commands ``module`` defines, built on an app of their own."""
    scratch = typer.Typer()
    importlib.import_module(f"{PACKAGE}.{module}").register(scratch)
    return dict(typer.main.get_group(scratch).commands)


@pytest.mark.parametrize("module", sorted(_by_module()))
def test_each_module_defines_exactly_its_entries(module: str) -> None:
    defined = _defined(module)
    assert set(defined) == _by_module()[module]
    for name, command in defined.items():
        assert getattr(command, "name", None) == name


def test_every_command_module_is_in_the_table() -> None:
    # A module no entry names is dead code, or a command nobody can run.
    modules = {path.stem for path in COMMANDS_DIR.glob("*.py") if path.stem != "__init__"}
    assert modules == set(_by_module())


def test_summaries_are_one_short_line() -> None:
    # --help shows each on one line beside the longest name (80 columns).
    for entry in COMMANDS:
        assert entry.summary.strip() == entry.summary and "\n" not in entry.summary
        assert entry.summary.endswith(".") and len(entry.summary) <= 57, entry.name


def test_the_fast_path_runs_exactly_the_commands_with_a_fast_spec() -> None:
    from pi_workflows.supervisor.cli import main

    assert set(main._HANDLERS) == {entry.name for entry in COMMANDS if entry.fast is not None}


@pytest.mark.parametrize(("args", "taken"), [
    (["status", "--json"], ("status", [], {"--json"}, {}, [])),
    (["status", "r1", "--json", "--project", "p"],
     ("status", ["r1"], {"--json"}, {"--project": "p"}, [])),
    (["run", "echo", "a", "b", "--detach", "--json"],
     ("run", ["echo", "a", "b"], {"--json", "--detach"}, {}, [])),
    (["resolve-follow-up", "ti-1", "--token", "t", "--json"],
     ("resolve-follow-up", ["ti-1"], {"--json"}, {"--token": "t"}, [])),
    (["host"], ("host", [], set(), {}, [])),
    (["host", "--concurrency", "2", "--", "--model", "x"],
     ("host", [], set(), {"--concurrency": "2"}, ["--model", "x"])),
])
def test_the_fast_parser_takes_a_plain_call(args: list[str], taken: tuple[object, ...]) -> None:
    from pi_workflows.supervisor.cli import main

    call = main._parse(args)
    assert (call.command, call.positional, call.seen, call.values, call.passed) == taken


@pytest.mark.parametrize("args", [
    [], ["paths", "--json"], ["bogus", "--json"], ["status"], ["status", "--json", "--json"],
    ["status", "a", "b", "--json"], ["status", "--json", "--project"],
    ["status", "--json", "--project", "-x"], ["status", "--json", "--"], ["run", "x", "--json"],
    ["resolve-follow-up", "ti-1", "--json"], ["host", "--background"], ["host", "x"],
    ["host", "--project", "a", "--project", "b"], ["status", "--help", "--json"],
])
def test_the_fast_parser_declines_the_rest(args: list[str]) -> None:
    from pi_workflows.supervisor.cli import main

    with pytest.raises(main._Declined):
        main._parse(args)
