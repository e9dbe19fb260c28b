"""Settings and the paths derived from them.

Owns: the ``PI_WORKFLOWS_*`` settings model, the optional TOML config file,
and resolution of per-project paths (state dir keyed by a hash of the
project's real path). A bad value names where it came from (argument,
environment variable or config file), the key and the type expected.
Imports pydantic, ``protocol.errors``, ``protocol.configfile`` and
``protocol.paths`` (whose ``Paths``, ``project_key``, ``ensure_private_dir`` and
``resolve_paths`` it re-exports).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from .configfile import expected, read_config
from .errors import UsageError
from .paths import Paths, ensure_private_dir, project_key, resolve_paths

__all__ = ["Paths", "Settings", "ensure_private_dir", "load_settings", "project_key",
           "resolve_paths"]

DEFAULT_HOME = Path("~/.pi/agent/workflows")
FsyncPolicy = Literal["always", "node", "never"]
SyncMode = Literal["OFF", "NORMAL", "FULL", "EXTRA"]


def config_file() -> Path:
    """The optional TOML config file: ``PI_WORKFLOWS_CONFIG`` or ``<home>/config.toml``."""
    explicit = os.environ.get("PI_WORKFLOWS_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("PI_WORKFLOWS_HOME")
    return (Path(home) if home else DEFAULT_HOME).expanduser() / "config.toml"


class Settings(BaseSettings):
    """Every knob, from (highest first) arguments, environment, config file, defaults."""

    model_config = SettingsConfigDict(env_prefix="PI_WORKFLOWS_", extra="ignore")

    home: Path = DEFAULT_HOME
    state_dir: Path | None = None
    store_file: Path | None = None
    runs_dir: Path | None = None
    host_lock: Path | None = None
    log_dir: Path | None = None
    # Workflow definitions: None means <project>/.pi/workflows and <home>
    # (whose default is ~/.pi/agent/workflows); a relative project dir is
    # taken from the project.
    project_workflows_dir: Path | None = None
    global_workflows_dir: Path | None = None

    lease_ms: int = Field(default=30_000, ge=100)
    renew_ms: int = Field(default=10_000, ge=20)
    busy_timeout_ms: int = Field(default=5_000, ge=0)
    sqlite_synchronous: SyncMode = "NORMAL"
    fsync: FsyncPolicy = "node"
    log_level: str = "INFO"

    # The host (docs/host.md).
    concurrency: int | None = Field(default=None, ge=1, le=256)
    drain_grace_s: float = Field(default=10.0, ge=0)
    crash_limit: int = Field(default=3, ge=1)
    crash_window_s: float = Field(default=600.0, gt=0)
    restart_backoff_s: float = Field(default=0.5, ge=0)
    poll_interval_s: float = Field(default=1.0, gt=0)
    hung_kill_after_s: float = Field(default=5.0, ge=0)
    zygote: bool = True  # fork workers from a booted zygote; false: cold spawns
    standby: bool = True  # the old name: false turns the zygote off too
    zygote_spare: bool = True  # the zygote keeps one worker forked ahead, booted

    # Agent steps (docs/agents.md).
    pi_bin: str | None = None  # default: the project-local install, then `pi` on PATH
    pi_agent_dir: Path | None = None  # PI_CODING_AGENT_DIR for the Pi child
    pi_args: str = ""  # extra `pi` arguments, split like a shell does
    agent_reminders: int = Field(default=2, ge=0, le=10)

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        # A worker renews at most every half lease, so one late renewal never
        # loses its claim (and a host never kills a healthy worker as hung).
        if self.renew_ms * 2 > self.lease_ms:
            raise ValueError(f"renew_ms ({self.renew_ms}) must be at most half of lease_ms"
                             f" ({self.lease_ms})")
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
        if os.environ.get("PI_WORKFLOWS_CONFIG") and not path.is_file():
            # A config file that was asked for by name must not be silently skipped.
            what = "a directory" if path.is_dir() else "missing"
            raise UsageError(f"the config file {path} (PI_WORKFLOWS_CONFIG) is {what}",
                             code="config_invalid")
        if path.is_file():
            read_config(path, cls.model_fields)  # unknown keys, syntax: errors naming the file
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)


def load_settings(**overrides: Any) -> Settings:
    """Build settings; a bad value becomes one clear ``UsageError`` line."""
    clean = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**clean)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = first.get("loc", ())
        msg = str(first.get("msg", "bad value")).removeprefix("Value error, ")
        if not loc:
            raise UsageError(f"invalid settings: {msg}") from None
        key = str(loc[0])
        field = Settings.model_fields.get(key)
        wants = f"expected {expected(field.annotation, field.metadata)}: " if field else ""
        # The value itself is never shown: a setting may hold a secret.
        raise UsageError(f"invalid setting {key}{_origin(key, clean)}: {wants}{msg}",
                         code="config_invalid") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read settings: {exc}") from None


def _origin(key: str, overrides: dict[str, Any]) -> str:
    """Where a setting's bad value came from, highest source first, for its error."""
    if key in overrides:
        return ""
    env = f"PI_WORKFLOWS_{key.upper()}"
    if env in os.environ:
        return f" (environment variable {env})"
    path = config_file()
    return f" in the config file {path}" if path.is_file() else ""
