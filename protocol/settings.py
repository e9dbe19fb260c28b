"""The pydantic-settings reader of the settings, and the paths derived from them.

Owns the ``PI_WORKFLOWS_*`` settings model, built from the one declaration
(``protocol.settingspec.SettingsLike``: names, types, defaults, bounds), with
the optional TOML config file as a source, and the one-line error of a bad
value: it names where the value came from (argument, environment variable or
config file), the key and the type expected, never the value. The command
line reads the plain cases without it (``protocol.leansettings``); this
module decides the rest and words every refusal. Imports pydantic,
``protocol.errors``, ``protocol.configfile``, ``protocol.settingspec`` and
``protocol.paths`` (whose ``Paths``, ``project_key``, ``ensure_private_dir``
and ``resolve_paths`` it re-exports).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

from pydantic import Field, ValidationError, create_model, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from .configfile import expected, read_config
from .errors import UsageError
from .paths import Paths, ensure_private_dir, project_key, resolve_paths
from .settingspec import (
    DEFAULT_HOME,
    FIELDS,
    PREFIX,
    SettingsLike,
    no_config_file,
    settings_problem,
)

__all__ = ["Paths", "Settings", "SettingsLike", "ensure_private_dir", "load_settings",
           "project_key", "resolve_paths"]


def config_file() -> Path:
    """The optional TOML config file: ``PI_WORKFLOWS_CONFIG`` or ``<home>/config.toml``."""
    explicit = os.environ.get(f"{PREFIX}CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get(f"{PREFIX}HOME")
    return (Path(home) if home else DEFAULT_HOME).expanduser() / "config.toml"


class _Model(BaseSettings):
    """The sources and the rule between fields; the fields come from the declaration."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, extra="ignore")

    @model_validator(mode="after")
    def _consistent(self) -> _Model:
        problem = settings_problem(self)
        if problem is not None:
            raise ValueError(problem)
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = config_file()
        if os.environ.get(f"{PREFIX}CONFIG") and no_config_file(path):
            return tuple(sources)
        if os.environ.get(f"{PREFIX}CONFIG") and not path.is_file():
            # A config file that was asked for by name must not be silently skipped.
            what = ("a directory" if path.is_dir() else
                    "not a regular file" if path.exists() else "missing")
            raise UsageError(f"the config file {path} (PI_WORKFLOWS_CONFIG) is {what}",
                             code="config_invalid")
        if path.is_file():
            read_config(path, FIELDS)  # unknown keys, syntax: errors naming the file
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)


# One pydantic field per declared setting, with its default and bounds.
Settings: type[_Model] = create_model(  # type: ignore[call-overload]
    "Settings", __base__=_Model,
    **{name: (f.annotation, Field(default=f.default, ge=f.bounds.ge, gt=f.bounds.gt,
                                  le=f.bounds.le))
       for name, f in FIELDS.items()})


def load_settings(**overrides: Any) -> SettingsLike:
    """Build settings; a bad value becomes one clear ``UsageError`` line."""
    clean = {k: v for k, v in overrides.items() if v is not None}
    try:
        # The model's fields are the declaration's, so it is one (mypy cannot see it).
        return cast(SettingsLike, Settings(**clean))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = first.get("loc", ())
        msg = str(first.get("msg", "bad value")).removeprefix("Value error, ")
        if not loc:
            raise UsageError(f"invalid settings: {msg}") from None
        key = str(loc[0])
        field = FIELDS.get(key)
        wants = f"expected {expected(field.annotation, [field.bounds])}: " if field else ""
        # The value itself is never shown: a setting may hold a secret.
        raise UsageError(f"invalid setting {key}{_origin(key, clean)}: {wants}{msg}",
                         code="config_invalid") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read settings: {exc}") from None


def _origin(key: str, overrides: dict[str, Any]) -> str:
    """Where a setting's bad value came from, highest source first, for its error."""
    if key in overrides:
        return ""
    env = f"{PREFIX}{key.upper()}"
    if env in os.environ:
        return f" (environment variable {env})"
    path = config_file()
    return f" in the config file {path}" if path.is_file() else ""
