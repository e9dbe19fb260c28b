"""Per-project paths and private directories, with no settings machinery.

Owns the ``Paths`` record, the project key (a short hash of the project's
real path) and creating 0700 directories. Kept free of pydantic so the
worker's boot stays light; also resolving them from settings (``resolve_paths``),
which the pydantic settings and the command line's lean ones share. Imports
``protocol.errors`` only.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import UsageError
from .record import record

if TYPE_CHECKING:
    from .settingspec import SettingsLike


@record(frozen=True)
class Paths:
    """Where one project's durable state lives."""

    project: Path
    home: Path
    state_dir: Path
    store_file: Path
    runs_dir: Path
    host_lock: Path
    log_dir: Path

    def as_json(self) -> dict[str, str]:
        return {
            "home": str(self.home),
            "stateDir": str(self.state_dir),
            "storeFile": str(self.store_file),
            "runsDir": str(self.runs_dir),
            "hostLock": str(self.host_lock),
            "logDir": str(self.log_dir),
        }


def project_key(project: Path) -> str:
    """A short, stable directory name for a project: ``<slug>-<hash12>``."""
    real = os.path.realpath(project)
    digest = hashlib.sha256(real.encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(real).name).strip("-.")[:40] or "root"
    return f"{slug}-{digest}"



def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) as 0700 directories; tighten if it exists."""
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        # exist_ok: another process may create the same directory concurrently.
        directory.mkdir(mode=0o700, exist_ok=True)
    if not path.is_dir():  # never chmod (or write into) something that is not ours to
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(path))
    if path.stat().st_mode & 0o777 != 0o700:
        os.chmod(path, 0o700)
    return path


def resolve_paths(settings: SettingsLike, project: Path | str) -> Paths:
    """Derive every path; each one can be overridden on its own.

    Only the path fields of ``settings`` are read.
    """
    proj = Path(os.path.realpath(Path(project).expanduser()))
    if not proj.is_dir():
        raise UsageError(f"project directory does not exist: {proj}")
    home = settings.home.expanduser().absolute()
    state = (settings.state_dir or home / "projects" / project_key(proj)).expanduser().absolute()

    def pick(value: Path | None, default: Path) -> Path:
        return (value or default).expanduser().absolute()

    return Paths(
        project=proj,
        home=home,
        state_dir=state,
        store_file=pick(settings.store_file, state / "store.sqlite3"),
        runs_dir=pick(settings.runs_dir, state / "runs"),
        host_lock=pick(settings.host_lock, state / "host.lock"),
        log_dir=pick(settings.log_dir, state / "logs"),
    )
