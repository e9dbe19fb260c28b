"""``pi-workflows model serve`` as a real process: what it prints, what it answers, how it
stops (SIGINT, SIGTERM: exit 0), and its refusals (one line, exit 2, nothing written)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pi_workflows.supervisor.model.serve import READY
from pi_workflows.worker.agent import with_contract

from tests.helpers.processes import reap
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.timeout(60)

OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PI_WORKFLOWS_")}
    return {**env, "HOME": str(tmp_path / "home"), "PI_WORKFLOWS_HOME": str(tmp_path / "pw")}


def _serve(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pi_workflows", "model", "serve", *args,
                             "--project", str(tmp_path)], env=_env(tmp_path), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    proc = _serve(tmp_path, "--agent-dir", str(tmp_path / "agent"))
    assert proc.stdout is not None
    lines: list[str] = []
    # Read up to the models.json entry's last line (its closing brace).
    while not lines or lines[-1] != "  }":
        line = proc.stdout.readline()
        assert line, f"model serve ended early: {lines} {proc.stderr.read() if proc.stderr else ''}"
        lines.append(line.rstrip("\n"))
    yield proc, lines
    reap(proc)


def _url(lines: list[str]) -> str:
    assert lines[0].startswith(READY + " http://127.0.0.1:"), lines[0]
    return lines[0].split()[4]


def _complete(url: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    body = json.dumps({"model": "scripted-model", "stream": True, "messages": messages})
    request = urllib.request.Request(f"{url}/chat/completions", body.encode(),
                                     {"Content-Type": "application/json"})
    with OPENER.open(request, timeout=20) as response:
        text = response.read().decode()
    return [json.loads(line[6:]) for line in text.splitlines()
            if line.startswith("data: {")]


def test_it_prints_the_settings_and_answers_a_step(
        tmp_path: Path, served: tuple[subprocess.Popen[str], list[str]]) -> None:
    proc, lines = served
    url = _url(lines)
    agent = tmp_path / "agent"
    assert f"  export PI_WORKFLOWS_PI_AGENT_DIR={agent}" in lines
    models = json.loads((agent / "models.json").read_text())
    assert models["providers"]["scripted"]["baseUrl"] == url
    assert json.loads("\n".join(lines[lines.index("  {"):])) == models  # the entry shown
    assert json.loads((agent / "settings.json").read_text())["defaultProvider"] == "scripted"
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in agent.iterdir()} == {
        "models.json": "0o600", "settings.json": "0o600"}
    assert oct(agent.stat().st_mode & 0o777) == "0o700"
    contract = with_contract("Summarize.", {"type": "object", "required": ["summary"]},
                             workflow="w", step="s", attempt="s-1-abc123")
    chunks = _complete(url, [{"role": "user", "content": contract}])
    calls = [c for chunk in chunks if chunk.get("choices")
             for c in chunk["choices"][0]["delta"].get("tool_calls", [])]
    arguments = json.loads("".join(c["function"].get("arguments", "") for c in calls))
    assert arguments == {"action": "submit", "step": "s", "attempt": "s-1-abc123",
                         "output": {"summary": "summary from the scripted model"}}
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert (proc.returncode, err) == (0, "")
    assert out.strip().splitlines()[-1] == ("pi-workflows model serve: stopped after 1 model"
                                            " request(s)")


def test_sigterm_stops_it_cleanly(served: tuple[subprocess.Popen[str], list[str]]) -> None:
    proc, _ = served
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=20)
    assert (proc.returncode, err) == (0, "")
    assert "stopped after 0 model request(s)" in out


def test_the_default_agent_dir_is_in_the_projects_state_directory(tmp_path: Path) -> None:
    proc = _serve(tmp_path)
    try:
        assert proc.stdout is not None
        first, second = proc.stdout.readline(), proc.stdout.readline()
        assert first.startswith(READY)
        agent = Path(second.split(": ", 1)[1].split(" (")[0])
        assert agent.name == "offline-pi-agent" and (tmp_path / "pw") in agent.parents
        assert (agent / "models.json").is_file()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
    assert proc.returncode == 0


def _refused(tmp_path: Path, *args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "pi_workflows", "model", *args,
                           "--project", str(tmp_path)], env=_env(tmp_path), text=True,
                          capture_output=True, timeout=30)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    return proc.stderr


def test_a_bad_script_is_one_line_and_exit_2(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text('{"replies": [{"say": "hi"}]}')
    err = _refused(tmp_path, "serve", "--script", str(script), "--agent-dir",
                   str(tmp_path / "agent"))
    assert err == (f"pi-workflows: error: --script {script}: reply 1 must have exactly one of"
                   " text, submit, tool, error\n")
    assert not (tmp_path / "agent").exists()  # nothing written
    assert "cannot read it (Is a directory)" in _refused(tmp_path, "serve", "--script",
                                                           str(tmp_path))


def test_an_unknown_action_a_busy_port_and_a_foreign_agent_dir_are_refused(
        tmp_path: Path) -> None:
    assert _refused(tmp_path, "stop") == (
        "pi-workflows: error: model stop: unknown action; use serve\n")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert f"127.0.0.1:{port} is in use" in _refused(
            tmp_path, "serve", "--port", str(port), "--agent-dir", str(tmp_path / "agent"))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "models.json").write_text('{"providers": {"anthropic": {}}}')
    assert "holds Pi settings of its own" in _refused(tmp_path, "serve", "--agent-dir",
                                                      str(mine))
    assert (mine / "models.json").read_text() == '{"providers": {"anthropic": {}}}'
    assert sorted(p.name for p in mine.iterdir()) == ["models.json"]


def test_the_users_own_pi_agent_dir_is_refused_even_without_settings(tmp_path: Path) -> None:
    # ~/.pi/agent with only auth.json: writing there would make every `pi` use the model.
    own = tmp_path / "home" / ".pi" / "agent"
    own.mkdir(parents=True)
    (own / "auth.json").write_text("{}")
    assert _refused(tmp_path, "serve", "--agent-dir", str(own)) == (
        f"pi-workflows: error: --agent-dir {own}: that is your own Pi's agent directory,"
        " which every `pi` reads; give another directory\n")
    assert sorted(p.name for p in own.iterdir()) == ["auth.json"]  # nothing written


def test_a_pi_agent_dir_override_that_serve_wrote_is_still_its_own(tmp_path: Path) -> None:
    # PI_CODING_AGENT_DIR pointed at the offline directory, so a plain `pi` uses it too.
    first = _serve(tmp_path, "--agent-dir", str(tmp_path / "agent"))
    assert first.stdout is not None and first.stdout.readline().startswith(READY)
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=20)
    env = {**_env(tmp_path), "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    again = subprocess.Popen([sys.executable, "-m", "pi_workflows", "model", "serve",
                              "--agent-dir", str(tmp_path / "agent"), "--project", str(tmp_path)],
                             env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert again.stdout is not None and again.stdout.readline().startswith(READY)
    finally:
        again.send_signal(signal.SIGTERM)
        again.communicate(timeout=20)
    assert again.returncode == 0


def test_a_second_serve_reuses_its_own_agent_dir(tmp_path: Path) -> None:
    for _ in range(2):
        proc = _serve(tmp_path, "--agent-dir", str(tmp_path / "agent"))
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(READY)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
        assert proc.returncode == 0
    wait_for(lambda: (tmp_path / "agent" / "models.json").is_file(), what="the agent dir")
