"""Settings without pydantic, for the command line and the plain cases.

Owns ``lean_settings()``: the ``PI_WORKFLOWS_*`` environment variables and
the TOML config file, read with the standard library against the one
declaration (``protocol.settingspec``), for the common case only. Every
value must be in a plain, canonical form (``30000``, ``2.5``, ``true``, an
exact ``NORMAL``) and every rule must hold; anything else (an odd spelling,
a bad value, a missing or broken config file, a lower-case variable name)
returns None, and the caller asks ``protocol.settings`` instead, which gives
the answer or the error message pydantic gives. So the lean path never
decides a question differently: it only declines.
``tests/protocol/test_leansettings.py`` proves the agreement over a matrix
of inputs. ``current_settings()`` is what a command calls: lean when it can,
pydantic when it must. Imports ``protocol.settingspec`` and the standard
library (pydantic only when it declines).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from .settingspec import (
    DEFAULT_HOME,
    FIELDS,
    PREFIX,
    Setting,
    SettingsLike,
    Values,
    no_config_file,
    settings_problem,
)

_INT = re.compile(r"-?(0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")
_LONGEST = 40  # digits and signs in a plain number the lean reader converts
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
_NONE = type(None)


class Declined(Exception):
    """Not a plain case: ``protocol.settings`` decides it."""


def _kind(field: Setting) -> Any:
    """The one non-None type a value of ``field`` has (``Path``, ``int``, a ``Literal``...)."""
    kinds = [k for k in field.kinds if k is not _NONE]
    if len(kinds) != 1:
        raise Declined  # a union the lean reader does not know: let pydantic decide
    return kinds[0]


def _from_env(field: Setting, text: str) -> Any:
    kind = _kind(field)
    if kind is Path:
        if not text or text != text.strip():
            raise Declined
        return Path(text)
    if kind is bool:
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise Declined
    if kind is int:
        # int() refuses a text of over 4300 digits with a ValueError; every
        # integer setting is bounded far below 10**18, so a long one is out
        # of bounds anyway and pydantic words the refusal.
        if len(text) > _LONGEST or not _INT.fullmatch(text):
            raise Declined
        return int(text)
    if kind is float:
        if len(text) > _LONGEST or not _FLOAT.fullmatch(text):
            raise Declined
        return float(text)
    if kind is str:
        return text
    if get_origin(kind) is Literal and text in get_args(kind):
        return text
    raise Declined


def _from_toml(field: Setting, value: Any) -> Any:
    kind = _kind(field)
    if kind is Path:
        if type(value) is not str or not value or value != value.strip():
            raise Declined
        return Path(value)
    if kind is float:
        if type(value) not in (int, float):
            raise Declined
        return float(value)
    if kind in (bool, int, str):
        if type(value) is not kind:
            raise Declined
        return value
    if get_origin(kind) is Literal and type(value) is str and value in get_args(kind):
        return value
    raise Declined


def _config_values() -> dict[str, Any]:
    explicit = os.environ.get(f"{PREFIX}CONFIG")
    if explicit:
        path = Path(explicit).expanduser()
    else:
        home = os.environ.get(f"{PREFIX}HOME")
        path = (Path(home) if home else DEFAULT_HOME).expanduser() / "config.toml"
    if explicit and no_config_file(path):
        return {}
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


def _resolve() -> Values:
    env: dict[str, str] = {}
    for key, text in os.environ.items():
        if key.upper().startswith(PREFIX):
            if key != key.upper():
                raise Declined  # pydantic-settings matches names in any case
            env[key[len(PREFIX):].lower()] = text
    config = _config_values()
    values: dict[str, Any] = {}
    for name, field in FIELDS.items():
        if name in env:
            value = _from_env(field, env[name])
        elif name in config:
            value = _from_toml(field, config[name])
        else:
            value = field.default
        if isinstance(value, int | float) and not isinstance(value, bool) \
                and not field.bounds.holds(value):
            raise Declined
        values[name] = value
    resolved = Values(values)
    if settings_problem(resolved) is not None:
        raise Declined
    return resolved


def lean_settings() -> SettingsLike | None:
    """Settings equal, field by field, to ``protocol.settings.load_settings()``; or None.

    The value has every attribute of the declaration (same names, types and
    values) and nothing else; None means "not a plain case: ask pydantic".
    """
    try:
        return _resolve()
    except Declined:
        return None


def current_settings() -> SettingsLike:
    """The settings a command runs with: read lean, or by pydantic (which words any error)."""
    settings = lean_settings()
    if settings is None:
        from .settings import load_settings

        settings = load_settings()
    return settings
