"""Per-project paths and private directories, with no settings machinery.

Owns the ``Paths`` record, the project key (a short hash of the project's
real path) and creating 0700 directories. Kept free of pydantic so the
worker's boot stays light. Imports nothing from the package.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
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
