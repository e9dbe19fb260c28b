"""The command table (``protocol.commands``), the command modules and the lazy app agree.

Every entry names a module under ``supervisor.cli.commands`` that defines a
command of that name, and each module defines exactly its entries: nothing
is registered anywhere else, so a command missing from the table could not
be run, listed or reserved as a word. The typer app reads the table: its
root ``--help``, completion and typo suggestions import no command module,
and running a command imports its own module only (each checked in a fresh
interpreter). The fast path parses by the table's specs.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import typer
from pi_workflows.protocol.commands import COMMAND_WORDS, COMMANDS
from pi_workflows.supervisor.cli.app import app
from pi_workflows.supervisor.cli.lazy import LazyGroup

COMMANDS_DIR = Path(__file__).resolve().parents[3] / "supervisor" / "cli" / "commands"
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


def test_the_app_resolves_every_entry_to_its_command() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, LazyGroup)
    ctx = typer.Context(group)
    assert group.list_commands(ctx) == list(COMMAND_WORDS)
    for entry in COMMANDS:
        command = group.get_command(ctx, entry.name)
        assert command is not None and command.name == entry.name, entry
    assert group.get_command(ctx, "bogus") is None


# Runs the CLI's entry point in this interpreter, then reports which command
# modules it imported (on stderr's last line, after the command's own output).
PROBE = """
import json, sys
from pi_workflows.supervisor.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:  # shell completion exits by itself
    code = exc.code
prefix = "pi_workflows.supervisor.cli.commands."
loaded = sorted(name[len(prefix):] for name in sys.modules if name.startswith(prefix))
slow = sorted(name for name in ("pydantic", "pydantic_settings") if name in sys.modules)
sys.stderr.write("\\n" + json.dumps({"loaded": loaded, "slow": slow}) + "\\n")
sys.exit(code)
"""


def _probe(tmp_path: Path, *args: str, **env: str) -> tuple[int, str, str, dict[str, list[str]]]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=tmp_path,
                          env={**os.environ, "HOME": str(tmp_path), **env},
                          capture_output=True, text=True, timeout=60)
    err, _, report = proc.stderr.rstrip("\n").rpartition("\n")
    return proc.returncode, proc.stdout, err.strip(), json.loads(report)


def test_the_root_help_lists_the_table_and_imports_no_command_module(tmp_path: Path) -> None:
    code, out, err, report = _probe(tmp_path, "--help")
    assert (code, err) == (0, "")
    width = max(len(entry.name) for entry in COMMANDS)
    lines = out.splitlines()
    listed = lines[lines.index("Commands:") + 1:]
    assert listed == [f"  {entry.name:<{width}}  {entry.summary}" for entry in COMMANDS]
    # Nor the settings model: --help reads no settings.
    assert report == {"loaded": [], "slow": []}


@pytest.mark.parametrize(("args", "module", "env"), [
    (["paths", "--json"], "paths", {}),
    (["workflows", "--json"], "workflows_validate", {}),
    (["list", "--json"], "status_list", {"PI_WORKFLOWS_NO_FAST_CLI": "1"}),
    (["watch", "--help"], "watch", {}),
])
def test_a_command_imports_its_own_module_only(
        tmp_path: Path, args: list[str], module: str, env: dict[str, str]) -> None:
    code, out, err, report = _probe(tmp_path, *args, **env)
    assert (code, err) == (0, "")
    assert report["loaded"] == [module]
    if "--json" in args:
        assert json.loads(out)


def test_completion_and_typos_read_the_table_alone(tmp_path: Path) -> None:
    code, out, _, report = _probe(tmp_path, _PI_WORKFLOWS_COMPLETE="complete_bash",
                                  COMP_WORDS="pi-workflows sta", COMP_CWORD="1")
    assert (code, out.split(), report["loaded"]) == (0, ["start", "status"], [])
    # zsh shows each name with its summary.
    code, out, _, report = _probe(tmp_path, _PI_WORKFLOWS_COMPLETE="complete_zsh",
                                  _TYPER_COMPLETE_ARGS="pi-workflows wa")
    watch = next(entry for entry in COMMANDS if entry.name == "watch")
    assert (code, report["loaded"]) == (0, [])
    assert f'(("watch":"{watch.summary}"))' in out, out
    code, _, err, report = _probe(tmp_path, "stauts", "--json")
    assert code == 2 and report["loaded"] == []
    assert re.search(r"No such command 'stauts'\. Did you mean 'status'", err), err
