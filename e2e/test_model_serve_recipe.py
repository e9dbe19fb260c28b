"""The offline recipe of docs/agents.md, run as written: ``model serve`` as a real
subprocess, then the recipe's other lines in a shell with the real pinned Pi; the
summarize example completes and the server stops cleanly on Ctrl-C."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pi_workflows.supervisor.model.pienv import scrub_env
from pi_workflows.supervisor.model.serve import READY

from tests.helpers.processes import reap

from .harness import LineReader, Project
from .pi_env import pi_binary

pytestmark = pytest.mark.slow  # real processes: an e2e drill

REPO = Path(__file__).resolve().parents[1]


def recipe() -> list[str]:
    """The shell lines of the recipe in docs/agents.md."""
    doc = (REPO / "docs" / "agents.md").read_text()
    section = doc[doc.index("## Trying agent steps offline"):]
    block = section[section.index("```bash\n") + 8:]
    return block[:block.index("```")].strip().splitlines()


def test_the_recipe_is_five_lines_serving_first() -> None:
    lines = recipe()
    assert len(lines) == 5
    assert lines[0].startswith("pi-workflows model serve ")
    assert any(line.startswith("pi-workflows run summarize ") for line in lines)


def _env(project: Project, tmp_path: Path) -> dict[str, str]:
    pi_binary()  # the pinned Pi is installed (scripts/setup), or this says how to get it
    # A checkout, as far as the recipe goes: examples/ in the working directory.
    shutil.copytree(REPO / "examples", project.root / "examples")
    env = dict(project.env)
    scrub_env(env)  # no provider key or proxy: the scripted model is all there is
    env["HOME"] = str(tmp_path / "user")
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    return env


def _recipe(project: Project, env: dict[str, str], first: str,
            rest: list[str]) -> tuple[str, str]:
    """Terminal 1 runs ``first`` until Ctrl-C; terminal 2 runs ``rest`` meanwhile; what
    terminal 2 printed, and terminal 1's last line."""
    server = subprocess.Popen(["bash", "-c", f"exec {first}"], cwd=project.root, env=env,
                              text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert server.stdout is not None
        out = LineReader(server.stdout)
        assert out.next(30, "the serving line").startswith(READY + " http://127.0.0.1:")
        shell = subprocess.run(["bash", "-e", "-c", "\n".join(rest)], cwd=project.root,
                               env=env, text=True, capture_output=True, timeout=180)
        assert shell.returncode == 0, shell.stdout + shell.stderr
        server.send_signal(signal.SIGINT)  # Ctrl-C in terminal 1
        assert server.wait(20) == 0
        assert server.stderr is not None and server.stderr.read() == ""
        last = ""
        while "stopped after" not in last:
            last = out.next(5, "the stopped line")
        return shell.stdout, last
    finally:
        reap(server)


@pytest.mark.timeout(240)
def test_the_offline_recipe_runs_summarize_to_completion(project: Project,
                                                         tmp_path: Path) -> None:
    first, *rest = recipe()
    printed, last = _recipe(project, _env(project, tmp_path), first, rest)
    assert re.search(r"#\d+ completed: .*summary from the scripted model", printed), printed
    assert re.fullmatch(r"pi-workflows model serve: stopped after [1-9]\d* model"
                        r" request\(s\)\n", last), last
    assert (tmp_path / "user" / "pi-offline" / "models.json").is_file()  # where it said


@pytest.mark.timeout(240)
def test_the_example_script_reads_a_file_then_submits_its_summary(project: Project,
                                                                  tmp_path: Path) -> None:
    first, *rest = recipe()
    scripted = first.replace("model serve", "model serve --script examples/summarize.model.json")
    printed, last = _recipe(project, _env(project, tmp_path), scripted, rest)
    assert "summarize> tool read" in printed, printed
    assert ("completed: {\"kind\": \"final\", \"message\": \"The example asks a Pi agent"
            in printed), printed
    script = json.loads((REPO / "examples" / "summarize.model.json").read_text())
    final = project.state(project.store().list_runs()[0].run_id)["outputs"]["summarize"]
    assert final == script["replies"][1]["submit"]  # the read, then the submission
    assert last == "pi-workflows model serve: stopped after 2 model request(s)\n"
