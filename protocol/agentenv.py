"""Where a run's agent settings come from: the launcher's agent dir, the host's provider env.

Owns the rule both sides apply (docs/agents.md, "Whose settings a run
uses"): the Pi agent directory (``PI_WORKFLOWS_PI_AGENT_DIR``) of the command
that queued a run is recorded with the run (a path, not a secret) and used
by whichever runner executes it; provider variables (API keys) are never
recorded and come from the environment of the process that runs the worker,
for a detached run the host. Also owns naming those variables (names only,
never values: the host publishes them in its lock file) and the one-line
notice ``run --detach`` prints when the host's side differs from the caller's.
Imports the standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

# Pi's own provider variables that do not end in _API_KEY (pi-ai's env-api-keys);
# general tokens (GITHUB_TOKEN, GH_TOKEN) are left out: they are set for other tools.
_PROVIDER_NAMES = frozenset({
    "ANTHROPIC_OAUTH_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE",
    "GOOGLE_APPLICATION_CREDENTIALS", "COPILOT_GITHUB_TOKEN", "HF_TOKEN",
})


def is_provider_variable(name: str) -> bool:
    return name.endswith("_API_KEY") or name in _PROVIDER_NAMES


def provider_env_names(environ: Mapping[str, str]) -> list[str]:
    """The provider variables set (non-empty) in ``environ``: names, sorted, never values."""
    return sorted(k for k, v in environ.items() if v and is_provider_variable(k))


def resolve_agent_dir(value: Path | str | None) -> str | None:
    """The setting as a runner hands it to Pi: ``~`` expanded, absolute."""
    if value is None or str(value) == "":
        return None
    return str(Path(value).expanduser().absolute())


def differences(caller_dir: str | None, caller_env: Iterable[str],
                host: Mapping[str, Any]) -> str | None:
    """How the running host's agent settings differ from the caller's, or None.

    ``host`` is the host's lock file; a host too old to publish its settings
    (no ``providerEnv``) is not compared.
    """
    names = host.get("providerEnv")
    if not isinstance(names, list):
        return None
    parts = []
    missing = sorted(set(caller_env) - {str(n) for n in names})
    if missing:
        parts.append(f"the host's environment lacks {', '.join(missing)}, set here (provider"
                     " variables come from the host)")
    host_dir = host.get("agentDir")
    if caller_dir is not None and caller_dir != host_dir:
        parts.append(f"this run uses agent dir {caller_dir}, recorded from here; the host's"
                     f" own is {host_dir or 'Pi default'}")
    elif caller_dir is None and host_dir:
        parts.append(f"this run uses the host's agent dir {host_dir}")
    if not parts:
        return None
    pid = host.get("pid", "?")
    return f"pi-workflows: note: agent settings differ from host pid {pid}: " + "; ".join(parts)
