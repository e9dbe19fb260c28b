"""Every setting, declared once: its name, type, default and bounds.

Owns ``SettingsLike``, the one declaration of the ``PI_WORKFLOWS_*``
settings: each annotated attribute is a setting (``Annotated[..., Bounds()]``
carries its limits), its class value the default. It is also the type every
function that takes settings asks for, so mypy checks each use against the
declaration. Two readers are built from it: ``protocol.leansettings`` (the
standard library, for the plain cases the command line meets) and
``protocol.settings`` (the pydantic-settings model, for everything else and
for the error messages). ``settings_problem`` is the one rule between
fields. Imports the standard library only: the fast command line and the
worker load it.
"""

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, get_args, get_origin

PREFIX = "PI_WORKFLOWS_"
DEFAULT_HOME = Path("~/.pi/agent/workflows")
FsyncPolicy = Literal["always", "node", "never"]
SyncMode = Literal["OFF", "NORMAL", "FULL", "EXTRA"]


class Bounds:
    """The limits of a number setting, as ``ge``/``gt``/``le`` (pydantic's names)."""

    __slots__ = ("ge", "gt", "le")

    def __init__(self, *, ge: float | None = None, gt: float | None = None,
                 le: float | None = None) -> None:
        self.ge, self.gt, self.le = ge, gt, le

    def holds(self, value: float) -> bool:
        # NaN compares false with everything, so it would pass every bound.
        if value != value:
            return False
        return not ((self.ge is not None and value < self.ge)
                    or (self.gt is not None and value <= self.gt)
                    or (self.le is not None and value > self.le))


NO_BOUNDS = Bounds()

# Every number setting has a lower and an upper bound: a value past them
# (a 2**70 lease, a 1e400 poll interval, which is inf) would pass the types
# and then break the host (sqlite integer overflow, ``time.sleep(inf)``).
# The upper bounds are far above any sensible value; they only keep the
# values in the range the code can handle.
DAY_MS = 86_400_000
HOUR_S = 3600.0

# Annotations are evaluated when the class is made (no ``from __future__``),
# so the readers get the types themselves, not their text.


class SettingsLike(Protocol):
    """Every knob, from (highest first) arguments, environment, config file, defaults."""

    home: Path = DEFAULT_HOME
    state_dir: Path | None = None
    store_file: Path | None = None
    # A PostgreSQL store (docs/store.md): postgresql://... ; None: the SQLite store_file.
    store_url: str | None = None
    runs_dir: Path | None = None
    host_lock: Path | None = None
    log_dir: Path | None = None
    # Workflow definitions: None means <project>/.pi/workflows and <home>
    # (whose default is ~/.pi/agent/workflows); a relative project dir is
    # taken from the project.
    project_workflows_dir: Path | None = None
    global_workflows_dir: Path | None = None

    lease_ms: Annotated[int, Bounds(ge=100, le=DAY_MS)] = 30_000
    renew_ms: Annotated[int, Bounds(ge=20, le=DAY_MS // 2)] = 10_000
    busy_timeout_ms: Annotated[int, Bounds(ge=0, le=600_000)] = 5_000
    sqlite_synchronous: SyncMode = "NORMAL"
    fsync: FsyncPolicy = "node"
    log_level: str = "INFO"

    # The host (docs/host.md).
    concurrency: Annotated[int | None, Bounds(ge=1, le=256)] = None
    drain_grace_s: Annotated[float, Bounds(ge=0, le=HOUR_S)] = 10.0
    crash_limit: Annotated[int, Bounds(ge=1, le=100)] = 3
    crash_window_s: Annotated[float, Bounds(gt=0, le=24 * HOUR_S)] = 600.0
    restart_backoff_s: Annotated[float, Bounds(ge=0, le=HOUR_S)] = 0.5
    poll_interval_s: Annotated[float, Bounds(gt=0, le=60)] = 1.0
    hung_kill_after_s: Annotated[float, Bounds(ge=0, le=HOUR_S)] = 5.0
    zygote: bool = True  # fork workers from a booted zygote; false: cold spawns
    standby: bool = True  # the old name: false turns the zygote off too
    zygote_spare: bool = True  # the zygote keeps one worker forked ahead, booted
    # Controller worker processes the host keeps while a controller file exists
    # (docs/controllers.md); 0 runs no reconciles.
    controller_workers: Annotated[int, Bounds(ge=0, le=64)] = 4

    # Agent steps (docs/agents.md).
    pi_bin: str | None = None  # default: the project-local install, then `pi` on PATH
    pi_agent_dir: Path | None = None  # PI_CODING_AGENT_DIR for the Pi child
    pi_args: str = ""  # extra `pi` arguments, split like a shell does
    agent_reminders: Annotated[int, Bounds(ge=0, le=10)] = 2


class Setting:
    """One setting as the readers see it."""

    __slots__ = ("annotation", "bounds", "default", "name")

    def __init__(self, name: str, annotation: Any, default: Any, bounds: Bounds) -> None:
        self.name, self.annotation, self.default, self.bounds = name, annotation, default, bounds

    @property
    def kinds(self) -> tuple[Any, ...]:
        """The types a value may have: ``(int, NoneType)``, ``(Literal[...],)``, ``(Path,)``."""
        if get_origin(self.annotation) is Literal:
            return (self.annotation,)
        return get_args(self.annotation) or (self.annotation,)


def _fields() -> dict[str, Setting]:
    out: dict[str, Setting] = {}
    for name, annotation in SettingsLike.__annotations__.items():
        # ``Annotated[T, Bounds(...)]`` keeps T as ``__origin__``, the rest as ``__metadata__``.
        extras = getattr(annotation, "__metadata__", ())
        bounds = next((e for e in extras if isinstance(e, Bounds)), NO_BOUNDS)
        annotation = annotation.__origin__ if extras else annotation
        out[name] = Setting(name, annotation, getattr(SettingsLike, name), bounds)
    return out


FIELDS: dict[str, Setting] = _fields()


def no_config_file(path: Path) -> bool:
    """``PI_WORKFLOWS_CONFIG=/dev/null``: the usual way to say "read no config file"."""
    return str(path) == os.devnull


def settings_problem(values: Any) -> str | None:
    """What is wrong between fields of otherwise valid settings, or None."""
    # A worker renews at most every half lease, so one late renewal never loses
    # its claim (and a host never kills a healthy worker as hung).
    if values.renew_ms * 2 > values.lease_ms:
        return (f"renew_ms ({values.renew_ms}) must be at most half of lease_ms"
                f" ({values.lease_ms})")
    url = getattr(values, "store_url", None)
    # Never the URL itself in the message: it may carry a password.
    if url is not None and not str(url).startswith(("postgresql://", "postgres://")):
        return "store_url must be a PostgreSQL URL (postgresql://USER@HOST:PORT/DATABASE)"
    return None


def redact_store_url(url: str) -> str:
    """A store URL as it may be shown: any password (user info or query) as ``***``."""
    head, sep, tail = url.rpartition("@")
    if sep and ":" in head.split("//", 1)[-1]:
        scheme, _, userinfo = head.partition("//")
        url = f"{scheme}//{userinfo.split(':', 1)[0]}:***@{tail}"
    return _QUERY_PASSWORD.sub(r"\1***", url)


_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&]*", re.IGNORECASE)


def redacted(name: str, value: Any) -> Any:
    """A setting's value as it may be shown: a store URL without its password."""
    return redact_store_url(str(value)) if name == "store_url" and value else value


class Values(SettingsLike):
    """Settings as plain attributes: the lean reader's result, and the defaults."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)

    def __repr__(self) -> str:
        return "Values(" + ", ".join(f"{k}={redacted(k, v)!r}"
                                     for k, v in self.__dict__.items()) + ")"


def defaults() -> SettingsLike:
    """Every setting at its default (what ``doctor`` checks with when settings are broken)."""
    return Values({name: field.default for name, field in FIELDS.items()})
