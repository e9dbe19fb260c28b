"""Per-project paths and private directories, with no settings machinery.

Owns the ``Paths`` record, the project key (a short hash of the project's
real path) and creating 0700 directories without following a symbolic link or
adopting another user's. Kept free of pydantic so the
worker's boot stays light; also resolving them from settings (``resolve_paths``),
which the pydantic settings and the command line's lean ones share. Imports
``protocol.errors`` only.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import NotADirectory, UnsafeDirectory, UsageError
from .record import record

if TYPE_CHECKING:
    from .settingspec import SettingsLike


# In a project's state dir, 0600: where a host's dashboard child (`host --ui`) leaves
# its URL, token included (the child writes it, the host removes it, the CLI reads it).
UI_URL_NAME = "ui-url"


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
    """Create ``path`` (and parents) as 0700 directories; tighten it if it exists and is ours.

    Nothing here follows a symbolic link at ``path``: a directory may sit in a
    shared place (the wakeup socket's fallback under the temporary
    directory), where another user could plant a link there, or a directory
    of their own, before we make it. So ``path`` is checked with ``lstat``
    first, and refused (``UnsafeDirectory``, naming it and why) when it is a
    link, not a directory, or owned by another user; it is tightened only
    through a descriptor opened without following links, on the same inode
    that was checked. Parents that already exist are the user's choice and
    are not judged; one that appears between our look and our ``mkdir`` is.
    """
    missing = []
    probe = path
    while not os.path.lexists(probe):  # lexists: a dangling link is something, not nothing
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            # Made in the meantime: by another of our processes, or by someone
            # else, so judge it before making anything inside it.
            _check_ours(directory)
    _tighten(path, _check_ours(path))
    return path


def _check_ours(path: Path) -> os.stat_result:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeDirectory(str(path), "it is a symbolic link; point the setting at a real"
                              " directory")
    if not stat.S_ISDIR(info.st_mode):
        raise NotADirectory(str(path), "it is not a directory")
    if info.st_uid != os.getuid():
        raise UnsafeDirectory(str(path), f"it is owned by another user (uid {info.st_uid})")
    return info


def _tighten(path: Path, checked: os.stat_result) -> None:
    if stat.S_IMODE(checked.st_mode) == 0o700:
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except PermissionError:
        # Ours but without its read bit, so it cannot be opened: the lstat
        # check above is what there is (only we can change its entry's parent).
        os.chmod(path, 0o700)
        return
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped for a link or a file since
            raise UnsafeDirectory(str(path), "it changed while being checked") from None
        raise
    try:
        now = os.fstat(fd)
        # The inode opened must be the one checked: chmod only what is ours.
        if (now.st_dev, now.st_ino) != (checked.st_dev, checked.st_ino) \
                or now.st_uid != os.getuid():
            raise UnsafeDirectory(str(path), "it changed while being checked")
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


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
