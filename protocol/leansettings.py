"""Settings without pydantic, for the command line's fast path.

Owns ``lean_settings()``: the same ``PI_WORKFLOWS_*`` environment variables
and TOML config file as ``protocol.settings``, read with the standard
library, for the common case only. Every value must be in a plain, canonical
form (``30000``, ``2.5``, ``true``, an exact ``NORMAL``) and every rule must
hold; anything else (an odd spelling, a bad value, a missing or broken config
file, a lower-case variable name) returns None, and the caller asks
``protocol.settings`` instead, which gives the answer or the error message
pydantic gives. So the lean path never decides a question differently: it
only declines. ``tests/protocol/test_leansettings.py`` proves the agreement
over a matrix of inputs. Imports ``protocol.configfile`` and the standard
library (never pydantic).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

PREFIX = "PI_WORKFLOWS_"
DEFAULT_HOME = Path("~/.pi/agent/workflows")

# name -> (kind, default, bounds as (ge, gt, le)); must match protocol.settings.Settings.
_P, _OP, _I, _OI, _F, _B, _S, _OS = ("path", "path?", "int", "int?", "float", "bool", "str",
                                     "str?")
FIELDS: dict[str, tuple[str, Any, tuple[float | None, float | None, float | None]]] = {
    "home": (_P, DEFAULT_HOME, (None, None, None)),
    "state_dir": (_OP, None, (None, None, None)),
    "store_file": (_OP, None, (None, None, None)),
    "runs_dir": (_OP, None, (None, None, None)),
    "host_lock": (_OP, None, (None, None, None)),
    "log_dir": (_OP, None, (None, None, None)),
    "project_workflows_dir": (_OP, None, (None, None, None)),
    "global_workflows_dir": (_OP, None, (None, None, None)),
    "lease_ms": (_I, 30_000, (100, None, None)),
    "renew_ms": (_I, 10_000, (20, None, None)),
    "busy_timeout_ms": (_I, 5_000, (0, None, None)),
    "sqlite_synchronous": ("OFF|NORMAL|FULL|EXTRA", "NORMAL", (None, None, None)),
    "fsync": ("always|node|never", "node", (None, None, None)),
    "log_level": (_S, "INFO", (None, None, None)),
    "concurrency": (_OI, None, (1, None, 256)),
    "drain_grace_s": (_F, 10.0, (0, None, None)),
    "crash_limit": (_I, 3, (1, None, None)),
    "crash_window_s": (_F, 600.0, (None, 0, None)),
    "restart_backoff_s": (_F, 0.5, (0, None, None)),
    "poll_interval_s": (_F, 1.0, (None, 0, None)),
    "hung_kill_after_s": (_F, 5.0, (0, None, None)),
    "zygote": (_B, True, (None, None, None)),
    "standby": (_B, True, (None, None, None)),
    "zygote_spare": (_B, True, (None, None, None)),
    "pi_bin": (_OS, None, (None, None, None)),
    "pi_agent_dir": (_OP, None, (None, None, None)),
    "pi_args": (_S, "", (None, None, None)),
    "agent_reminders": (_I, 2, (0, None, 10)),
}

_INT = re.compile(r"-?(0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


class Declined(Exception):
    """Not a plain case: ``protocol.settings`` decides it."""


def _from_env(kind: str, text: str) -> Any:
    if kind in (_P, _OP):
        if not text or text != text.strip():
            raise Declined
        return Path(text)
    if kind in (_I, _OI):
        if not _INT.fullmatch(text):
            raise Declined
        return int(text)
    if kind == _F:
        if not _FLOAT.fullmatch(text):
            raise Declined
        return float(text)
    if kind == _B:
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise Declined
    if kind in (_S, _OS):
        return text
    if text in kind.split("|"):
        return text
    raise Declined


def _from_toml(kind: str, value: Any) -> Any:
    if kind in (_P, _OP):
        if type(value) is not str or not value or value != value.strip():
            raise Declined
        return Path(value)
    if kind in (_I, _OI):
        if type(value) is not int:
            raise Declined
        return value
    if kind == _F:
        if type(value) not in (int, float):
            raise Declined
        return float(value)
    if kind == _B:
        if type(value) is not bool:
            raise Declined
        return value
    if type(value) is not str:
        raise Declined
    if kind in (_S, _OS) or value in kind.split("|"):
        return value
    raise Declined


def _bounded(value: Any, bounds: tuple[float | None, float | None, float | None]) -> None:
    ge, gt, le = bounds
    if value is None:
        return
    if (ge is not None and value < ge) or (gt is not None and value <= gt) or (
            le is not None and value > le):
        raise Declined


def _config_values() -> dict[str, Any]:
    explicit = os.environ.get(f"{PREFIX}CONFIG")
    if explicit:
        path = Path(explicit).expanduser()
    else:
        home = os.environ.get(f"{PREFIX}HOME")
        path = (Path(home) if home else DEFAULT_HOME).expanduser() / "config.toml"
    if not path.is_file():
        if explicit:
            raise Declined  # asked for by name and missing: the full path says so
        return {}
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise Declined from None
    if any(key not in FIELDS for key in data):
        raise Declined
    return data


def _resolve() -> SimpleNamespace:
    env: dict[str, str] = {}
    for key, text in os.environ.items():
        if key.upper().startswith(PREFIX):
            if key != key.upper():
                raise Declined  # pydantic-settings matches names in any case
            env[key[len(PREFIX):].lower()] = text
    config = _config_values()
    values: dict[str, Any] = {}
    for name, (kind, default, bounds) in FIELDS.items():
        if name in env:
            value = _from_env(kind, env[name])
        elif name in config:
            value = _from_toml(kind, config[name])
        else:
            value = default
        _bounded(value, bounds)
        values[name] = value
    if values["renew_ms"] * 2 > values["lease_ms"]:
        raise Declined
    return SimpleNamespace(**values)


def lean_settings() -> Any | None:
    """Settings equal, field by field, to ``protocol.settings.load_settings()``; or None.

    The value has every attribute of ``Settings`` (same names, types and
    values) and nothing else; None means "not a plain case: ask pydantic".
    """
    try:
        return _resolve()
    except Declined:
        return None
