"""``activate --session S --park-on-eof`` on the fast command line (the Pi extension's runner).

The fast path takes exactly that form, hands ``supervisor.session.activation``
the stdin lifeline and the plain view (standard output is no terminal here),
and prints through an ``echo`` that writes what ``typer.echo`` writes; the
byte-for-byte comparison with the typer app on real runs is
``e2e/test_fastcli.py``.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from pi_workflows.supervisor.cli import main
from pi_workflows.supervisor.cli.commands import start_activate
from pi_workflows.supervisor.session import activation, lifeline
from pi_workflows.supervisor.session.lifeline import stdin_lifeline
from pi_workflows.supervisor.views.runview import PlainView

from tests.helpers.cli import run_cli

pytestmark = pytest.mark.timeout(60)


def test_the_parser_takes_the_extension_form_in_any_order() -> None:
    for args in (["activate", "--session", "s1", "--park-on-eof", "--project", "p"],
                 ["activate", "--project", "p", "--park-on-eof", "--session", "s1"]):
        call = main._parse(args)
        assert (call.command, call.positional, call.seen, call.values) == (
            "activate", [], {"--park-on-eof"}, {"--session": "s1", "--project": "p"})


@pytest.mark.parametrize("args", [
    ["activate", "--session", "s1"],  # no lifeline: a terminal's activate
    ["activate", "--park-on-eof"],  # the session from the environment
    ["activate", "--session", "s1", "--park-on-eof", "--json"],
    ["activate", "--session", "s1", "--park-on-eof", "--park-on-eof"],
    ["activate", "--session", "s1", "--park-on-eof", "run-1"],
    ["activate", "--session", "-x", "--park-on-eof"],
    ["activate", "--session=s1", "--park-on-eof"],
    ["activate", "--session", "s1", "--park-on-eof", "--help"],
])
def test_every_other_form_is_left_to_typer(args: list[str]) -> None:
    with pytest.raises(main._Declined):
        main._parse(args)


def _project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    project = tmp_path / "proj"
    (project / ".pi" / "workflows").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PI_WORKFLOWS_")}
    return project, {**env, "PI_WORKFLOWS_HOME": str(tmp_path / "home")}


def test_the_fast_path_hands_activation_the_lifeline_and_its_code_is_the_exit_code(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project, env = _project(tmp_path)
    seen: dict[str, Any] = {}

    def fake(store: object, settings: object, paths: Any, session: str, *,
             view: Any = None, lifeline: Any = None, **rest: Any) -> int:
        seen.update(session=session, view=view, lifeline=lifeline, project=paths.project,
                    rest=rest)
        view.say("run r1 \x1b[1m(quick)\x1b[0m; Ctrl-C parks it")
        return 4

    monkeypatch.setattr(activation, "activate", fake)
    out = run_cli("activate", "--session", "s1", "--park-on-eof", "--project", str(project),
                  env=env)
    assert (out.returncode, out.stdout, out.stderr) == (4, "run r1 (quick); Ctrl-C parks it\n",
                                                        "")
    assert seen["session"] == "s1" and seen["lifeline"] is stdin_lifeline
    assert isinstance(seen["view"], PlainView) and seen["rest"] == {}
    assert seen["project"] == project.resolve()


def test_nothing_to_activate_and_the_errors_read_as_on_the_typer_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project, env = _project(tmp_path)
    # This process's standard input is not a lifeline to watch: both paths get a stand-in.
    lifelines: list[object] = []
    monkeypatch.setattr(lifeline, "stdin_lifeline", lifelines.append)
    monkeypatch.setattr(start_activate, "stdin_lifeline", lifelines.append)
    where = ("--project", str(project))
    for args in (("activate", "--session", "s1", "--park-on-eof", *where),
                 ("activate", "--session", "bad one", "--park-on-eof", *where),
                 ("activate", "--session", "s1", "--park-on-eof", "--project",
                  str(tmp_path / "nowhere"))):
        fast = run_cli(*args, env=env)
        full = run_cli(*args, env={**env, "PI_WORKFLOWS_NO_FAST_CLI": "1"})
        assert (fast.returncode, fast.stdout, fast.stderr) == (
            full.returncode, full.stdout, full.stderr), args
        assert fast.returncode == 0 or (fast.returncode == 2 and fast.stderr.startswith(
            "pi-workflows: error: ") and len(fast.stderr.splitlines()) == 1), fast
    assert run_cli("activate", "--session", "s1", "--park-on-eof", *where,
                   env=env).stdout == "nothing to activate for session s1\n"
    assert len(lifelines) == 3  # one watch by each path, and the last call's


# Runs the entry point, then names what of the heavy imports it loaded.
LOADED = """
import json, sys
from pi_workflows.supervisor.cli.main import main
code = main(sys.argv[1:])
heavy = ("typer", "pydantic", "pydantic_settings", "psutil", "loguru", "rich",
         "pi_workflows.protocol.definitions.discovery", "pi_workflows.supervisor.session.actions",
         "pi_workflows.supervisor.procs.reaper", "pi_workflows.supervisor.procs.lockholders")
sys.stderr.write(json.dumps(sorted(m for m in heavy if m in sys.modules)) + "\\n")
sys.exit(code)
"""


def test_activate_reaches_its_claim_without_the_heavy_imports(tmp_path: Path) -> None:
    """Its start-up is on the way from the model's turn to the run's first node: no typer,
    no reaping (psutil, loguru) and no workflow loading before the worker is spawned."""
    project, env = _project(tmp_path)
    proc = subprocess.run([sys.executable, "-c", LOADED, "activate", "--session", "s1",
                           "--park-on-eof", "--project", str(project)], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (0, "nothing to activate for session s1\n")
    assert json.loads(proc.stderr.splitlines()[-1]) == []


class _Terminal(io.TextIOWrapper):
    def isatty(self) -> bool:
        return True


class _Unsure(io.TextIOWrapper):
    def isatty(self) -> bool:
        raise ValueError("closed")


@pytest.mark.parametrize("kind", [io.TextIOWrapper, _Terminal, _Unsure])
@pytest.mark.parametrize("line", ["plain", "\x1b[31mred\x1b[0m and \x1b[?25l", "",
                                  "é \x1b]0;t\x07"])
def test_echo_writes_the_bytes_typer_echo_writes(
        monkeypatch: pytest.MonkeyPatch, kind: type[io.TextIOWrapper], line: str) -> None:
    written = []
    for echo in (main._echo, typer.echo):
        raw = io.BytesIO()
        stream = kind(raw, encoding="utf-8", write_through=True)
        monkeypatch.setattr("sys.stdout", stream)
        echo(line)
        written.append(raw.getvalue())
    assert written[0] == written[1]
    assert written[0].endswith(b"\n")
