"""What a Pi child needs to talk to the scripted model.

Owns the agent directory's two files (``models.json``: one custom
``openai-completions`` provider at the scripted model; ``settings.json``: that
model by default, nothing retried or compacted), the scrubbing of an
environment so no provider key or proxy reaches a run's Pi, and the attempt
id a step contract names (``step_in_progress``). The drill (``drill.pienv``),
``pi-workflows model serve`` (``model.serve``), ``e2e/pi_env.py`` and
``e2e/agents_kit.py`` use the same functions. Imports ``model.scripted`` and
the standard library; never the worker.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from .scripted import Request, message_text

# The attempt id in the step contract (and in a reminder): <node>-<step>-<hex>.
ATTEMPT = re.compile(r"attempt ([A-Za-z0-9_.]+(?:-[A-Za-z0-9_.]+)*?-\d+-[0-9a-f]+)")
# The line every step message and prompt carries; its attempt is the one that counts (a
# retry's note also names the interrupted attempt).
CONTRACT = re.compile(r"Workflow step contract \(pi-workflows\): workflow [^,\n]*, step [^,\n]*,"
                      r" attempt ([A-Za-z0-9_.-]+)\.")
PROVIDER, MODEL_ID = "scripted", "scripted-model"


def models_config(base_url: str, *, provider: str, model_id: str,
                  api_key: str) -> dict[str, Any]:
    """``models.json``: one custom provider speaking Chat Completions to ``base_url``."""
    return {"providers": {provider: {
        "baseUrl": base_url,
        "api": "openai-completions",
        "apiKey": api_key,  # a literal: Pi takes a value that names no variable as is
        # Plain "system" role and no `store`: what a generic OpenAI-compatible server takes.
        "compat": {"supportsDeveloperRole": False, "supportsStore": False},
        "models": [{"id": model_id, "name": model_id, "reasoning": False,
                    "input": ["text"], "contextWindow": 128000, "maxTokens": 4096}],
    }}}


def settings_config(*, provider: str, model_id: str) -> dict[str, Any]:
    """``settings.json``: the scripted model by default, nothing retried or compacted."""
    return {
        # Pi's findInitialModel takes settings' defaultProvider + defaultModel before
        # "the first model with a key", which could be a built-in provider's.
        "defaultProvider": provider,
        "defaultModel": model_id,
        "defaultThinkingLevel": "off",
        # retry.enabled is Pi's own retry of a failed turn; retry.provider.maxRetries is
        # handed to the OpenAI SDK (it retries a 5xx twice by default).
        "retry": {"enabled": False, "maxRetries": 0, "provider": {"maxRetries": 0}},
        # A compaction would be an extra, unscripted model request.
        "compaction": {"enabled": False},
        "quietStartup": True,
        "enableInstallTelemetry": False,
    }


def scrub_env(env: dict[str, str]) -> None:
    """No provider key and no proxy reaches a run's Pi; loopback stays direct."""
    for key in [k for k in env if k.endswith("_API_KEY") or k.lower().endswith("_proxy")]:
        del env[key]
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    # Pi started by `chat`/`export` (not by a worker) must not look for updates either.
    env["PI_OFFLINE"] = env["PI_SKIP_VERSION_CHECK"] = "1"


def write_agent_dir(agent_dir: Path, base_url: str) -> Path:
    """A private agent directory (0700, files 0600) pointing Pi at ``base_url`` only."""
    agent_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    files = {"models.json": models_config(base_url, provider=PROVIDER, model_id=MODEL_ID,
                                          api_key="scripted-key"),
             "settings.json": settings_config(provider=PROVIDER, model_id=MODEL_ID)}
    for name, value in files.items():
        fd = os.open(agent_dir / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(value, fh, indent=2)
    return agent_dir


def attempt_in(texts: list[str]) -> str | None:
    """The attempt the newest step contract in ``texts`` names; else (a reminder) the
    newest attempt named at all."""
    contracts: list[str] = [a for t in texts for a in CONTRACT.findall(t)]
    if contracts:
        return contracts[-1]
    named: list[str] = [a for t in texts for a in ATTEMPT.findall(t)]
    return named[-1] if named else None


def step_in_progress(request: Request) -> str | None:
    """The attempt of the step in progress in the request's user messages (None: not a
    step): the newest contract line's, else the newest attempt named."""
    return attempt_in([message_text(m) for m in request.messages if m.get("role") == "user"])
