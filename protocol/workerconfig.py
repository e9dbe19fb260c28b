"""The settings a worker needs, handed to it by the runner that spawns it.

A runner resolves its settings once and passes them as JSON in one
environment variable (``protocol.wire.CONFIG_ENV``), so a worker boots
without the settings machinery (pydantic costs a fifth of a cold boot). A
worker started by hand, without the variable, resolves settings itself.
Imports ``protocol.paths`` only.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path

from .paths import Paths
from .settingspec import SettingsLike

_PATH_FIELDS = ("project", "home", "state_dir", "store_file", "runs_dir", "host_lock", "log_dir")


@dataclass(frozen=True)
class WorkerConfig:
    paths: Paths
    lease_ms: int
    renew_ms: int
    busy_timeout_ms: int
    sqlite_synchronous: str
    fsync: str
    # A graceful stop lets a running effect finish this long (the drain grace).
    park_grace_s: float
    log_level: str
    # Agent steps: extra `pi` arguments (the setting, then `host -- ARGS`),
    # the Pi binary and agent directory if set, and reminders per step.
    pi_args: tuple[str, ...] = ()
    pi_bin: str | None = None
    pi_agent_dir: str | None = None
    agent_reminders: int = 2
    # In-session agent steps: the Pi extension's conversation socket, set only
    # by a session runner that Pi spawned (protocol.conversation); None: headless.
    conversation: str | None = None
    # The PostgreSQL store's URL (``store_url``); None: the SQLite file in paths.
    store_url: str | None = None

    @classmethod
    def from_settings(cls, settings: SettingsLike, paths: Paths,
                      pi_args: tuple[str, ...] = ()) -> WorkerConfig:
        configured = tuple(shlex.split(settings.pi_args or ""))
        agent_dir = settings.pi_agent_dir
        return cls(paths, settings.lease_ms, settings.renew_ms, settings.busy_timeout_ms,
                   settings.sqlite_synchronous, settings.fsync, settings.drain_grace_s,
                   settings.log_level, configured + tuple(pi_args), settings.pi_bin,
                   None if agent_dir is None else str(Path(agent_dir).expanduser()),
                   int(settings.agent_reminders), store_url=settings.store_url)

    def to_json(self) -> str:
        data = asdict(self)
        data["paths"] = {k: str(getattr(self.paths, k)) for k in _PATH_FIELDS}
        data["pi_args"] = list(self.pi_args)
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> WorkerConfig:
        data = json.loads(text)
        paths = Paths(**{k: Path(data["paths"][k]) for k in _PATH_FIELDS})
        return cls(paths, int(data["lease_ms"]), int(data["renew_ms"]),
                   int(data["busy_timeout_ms"]), str(data["sqlite_synchronous"]),
                   str(data["fsync"]), float(data["park_grace_s"]), str(data["log_level"]),
                   tuple(str(a) for a in data.get("pi_args", ())), data.get("pi_bin"),
                   data.get("pi_agent_dir"), int(data.get("agent_reminders", 2)),
                   data.get("conversation"), data.get("store_url"))
