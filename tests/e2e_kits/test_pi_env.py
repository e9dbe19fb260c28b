"""An isolated Pi's files and environment (e2e.pi_env), checked without starting Pi:
what the agent directory says, what the child's environment keeps and drops, and that
a missing or unpinned Pi is a failure with the fix in its message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2e.pi_env import RPC_FLAGS, PiNotInstalled, make_pi_env, pi_binary, pi_child_env

PIN = {"dependencies": {"@mariozechner/pi-coding-agent": "0.73.1"}}


def fake_repo(root: Path, installed: str | None) -> Path:
    root.mkdir()
    (root / "package.json").write_text(json.dumps(PIN))
    if installed is not None:
        pkg = root / "node_modules" / "@mariozechner" / "pi-coding-agent"
        pkg.mkdir(parents=True)
        (pkg / "package.json").write_text(json.dumps({"version": installed}))
        binary = root / "node_modules" / ".bin" / "pi"
        binary.parent.mkdir()
        binary.write_text("#!/bin/sh\n")
        binary.chmod(0o755)
    return root


def test_pi_binary_is_the_pinned_install(tmp_path: Path) -> None:
    repo = fake_repo(tmp_path / "repo", "0.73.1")
    assert pi_binary(repo) == repo / "node_modules" / ".bin" / "pi"


def test_a_missing_pi_fails_with_the_install_command(tmp_path: Path) -> None:
    repo = fake_repo(tmp_path / "repo", None)
    with pytest.raises(PiNotInstalled, match="npm install") as caught:
        pi_binary(repo)
    assert isinstance(caught.value, AssertionError)  # a failure under pytest, not a skip


def test_another_pi_version_fails(tmp_path: Path) -> None:
    with pytest.raises(PiNotInstalled, match=r"0\.70\.0 is installed, not the pinned 0\.73\.1"):
        pi_binary(fake_repo(tmp_path / "repo", "0.70.0"))


def test_the_agent_dir_makes_the_scripted_model_the_default_with_no_retries(
        tmp_path: Path) -> None:
    env = make_pi_env(tmp_path / "pi", "http://127.0.0.1:4321/v1", model_id="m1",
                      settings={"quietStartup": False})
    models = json.loads((env.agent_dir / "models.json").read_text())
    provider = models["providers"]["scripted"]
    assert provider["api"] == "openai-completions"
    assert provider["baseUrl"] == "http://127.0.0.1:4321/v1"
    assert provider["apiKey"] and [m["id"] for m in provider["models"]] == ["m1"]
    settings = json.loads((env.agent_dir / "settings.json").read_text())
    assert (settings["defaultProvider"], settings["defaultModel"]) == ("scripted", "m1")
    assert settings["retry"]["enabled"] is False
    assert settings["retry"]["provider"]["maxRetries"] == 0
    assert settings["compaction"]["enabled"] is False
    assert settings["quietStartup"] is False  # a caller's setting wins
    assert env.cwd.is_dir() and not any(env.cwd.iterdir())


def test_the_child_env_is_isolated_from_the_callers(tmp_path: Path) -> None:
    base = {"PATH": "/usr/bin", "HOME": "/home/me", "HTTPS_PROXY": "http://proxy:3128",
            "http_proxy": "http://proxy:3128", "ALL_PROXY": "socks5://p", "NO_PROXY": "corp",
            "PI_CODING_AGENT_DIR": "/home/me/.pi/agent", "PI_WORKFLOWS_HOME": "/x",
            "OPENAI_API_KEY": "sk-real", "ANTHROPIC_API_KEY": "sk-ant"}
    env = pi_child_env(tmp_path / "agent", tmp_path / "tmp", base)
    assert env == {"PATH": "/usr/bin", "HOME": "/home/me",
                   "PI_CODING_AGENT_DIR": str(tmp_path / "agent"), "PI_OFFLINE": "1",
                   "PI_SKIP_VERSION_CHECK": "1", "TMPDIR": str(tmp_path / "tmp"),
                   "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


def test_argv_is_rpc_mode_with_every_discovery_off(tmp_path: Path) -> None:
    env = make_pi_env(tmp_path / "pi", "http://127.0.0.1:1/v1")
    argv = env.argv("-e", "/ext.ts", binary=Path("/bin/pi"))
    assert argv == ["/bin/pi", *RPC_FLAGS, "--no-session", "-e", "/ext.ts"]
    assert "--offline" in argv and "--no-context-files" in argv
    assert "--no-session" not in env.argv(session=True, binary=Path("/bin/pi"))
