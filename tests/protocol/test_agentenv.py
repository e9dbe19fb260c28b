"""The agent-settings rule: which names are provider variables, and the one-line note."""

from __future__ import annotations

from pi_workflows.protocol.agentenv import differences, provider_env_names, resolve_agent_dir


def test_provider_variables_are_named_never_valued() -> None:
    env = {"OPENAI_API_KEY": "sk-1", "EMPTY_API_KEY": "", "AWS_PROFILE": "dev",
           "GITHUB_TOKEN": "ghp", "HOME": "/h"}
    assert provider_env_names(env) == ["AWS_PROFILE", "OPENAI_API_KEY"]


def test_the_note_names_what_differs_and_nothing_when_they_agree() -> None:
    host = {"pid": 7, "agentDir": "/a", "providerEnv": ["OPENAI_API_KEY"]}
    assert differences("/a", ["OPENAI_API_KEY"], host) is None
    line = differences("/b", ["OPENAI_API_KEY", "XAI_API_KEY"], host)
    assert line is not None and "\n" not in line
    assert "host pid 7" in line and "lacks XAI_API_KEY" in line
    assert "agent dir /b, recorded from here; the host's own is /a" in line
    assert "the host's agent dir /a" in (differences(None, [], host) or "")
    assert differences("/b", ["X_API_KEY"], {"pid": 7}) is None  # an older host: no claim


def test_the_agent_dir_is_made_absolute() -> None:
    assert resolve_agent_dir(None) is None and resolve_agent_dir("") is None
    assert resolve_agent_dir("~/x").startswith("/")  # type: ignore[union-attr]
