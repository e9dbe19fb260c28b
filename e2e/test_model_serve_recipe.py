"""The offline recipe of docs/agents.md, run as written: ``model serve`` as a real
subprocess, then the recipe's other lines in a shell with the real pinned Pi; the
summarize example completes and the server stops cleanly on Ctrl-C."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pi_workflows.supervisor.drill.model_serve import READY
from pi_workflows.supervisor.drill.pienv import scrub_env

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


@pytest.mark.timeout(240)
def test_the_offline_recipe_runs_summarize_to_completion(project: Project,
                                                         tmp_path: Path) -> None:
    pi_binary()  # the pinned Pi is installed (scripts/setup), or this says how to get it
    first, *rest = recipe()
    # A checkout, as far as the recipe goes: examples/ in the working directory.
    shutil.copytree(REPO / "examples", project.root / "examples")
    env = dict(project.env)
    scrub_env(env)  # no provider key or proxy: the scripted model is all there is
    env["HOME"] = str(tmp_path / "user")
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    server = subprocess.Popen(["bash", "-c", f"exec {first}"], cwd=project.root, env=env,
                              text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert server.stdout is not None
        out = LineReader(server.stdout)
        assert out.next(30, "the serving line").startswith(READY + " http://127.0.0.1:")
        # Terminal 2: the rest of the recipe, as one shell session.
        shell = subprocess.run(["bash", "-e", "-c", "\n".join(rest)], cwd=project.root,
                               env=env, text=True, capture_output=True, timeout=180)
        assert shell.returncode == 0, shell.stdout + shell.stderr
        assert re.search(r"#\d+ completed: .*summary from the scripted model", shell.stdout), \
            shell.stdout
        server.send_signal(signal.SIGINT)  # Ctrl-C in terminal 1
        assert server.wait(20) == 0
        assert server.stderr is not None and server.stderr.read() == ""
        last = ""
        while "stopped after" not in last:
            last = out.next(5, "the stopped line")
        assert re.fullmatch(r"pi-workflows model serve: stopped after [1-9]\d* model"
                            r" request\(s\)\n", last), last
    finally:
        reap(server)
    agent_dir = tmp_path / "user" / "pi-offline"
    assert (agent_dir / "models.json").is_file()  # where the recipe said
