"""Private temporary directories that say who owns them, and the sweep of dead owners' ones.

Owns ``owned_tempdir`` (a 0700 directory from ``mkdtemp`` with an owner
file: the creating process's pid, its start time, its host name and run)
and ``sweep_tempdirs``, which removes such directories whose owner is
provably dead. A worker killed with ``kill -9`` cannot remove its bridge
socket's directory (``pwb-*``) or its Pi child's ``TMPDIR``
(``pi-workflows-pi-*``); the host's orphan sweep and ``gc`` remove them.
A directory without a readable owner file, another user's, or one whose
owner is alive (or cannot be judged: another machine) is always kept.
Imports ``protocol.liveness`` only.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

from .liveness import host_name, is_same_process, process_start_time

OWNER_FILE = ".pi-workflows-owner"
PREFIXES = ("pwb-", "pi-workflows-pi-")


def owned_tempdir(prefix: str, run_id: str | None = None) -> str:
    """A fresh private directory whose owner file names this process.

    The owner file is written before the path is returned, so nothing of the
    caller's lands in a directory the sweep could not attribute; until then
    the sweep keeps it (no owner file).
    """
    path = tempfile.mkdtemp(prefix=prefix)
    owner = {"pid": os.getpid(), "startTime": process_start_time(), "host": host_name(),
             "runId": run_id}
    fd = os.open(os.path.join(path, OWNER_FILE), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(owner, fh)
    return path


def _owner(path: Path) -> dict[str, object] | None:
    try:
        value = json.loads((path / OWNER_FILE).read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def owner_dead(path: Path, *, me: str | None = None) -> bool:
    """True only with proof: the owner ran on this machine and is gone (or its pid reused)."""
    owner = _owner(path)
    if owner is None:
        return False
    pid, start = owner.get("pid"), owner.get("startTime")
    if not isinstance(pid, int) or not isinstance(start, int | float):
        return False
    if owner.get("host") != (me if me is not None else host_name()):
        return False
    return not is_same_process(pid, float(start))


def leftover_tempdirs(root: Path | None = None) -> list[Path]:
    """This user's ``pwb-*`` and ``pi-workflows-pi-*`` directories whose owner is dead."""
    base = Path(root if root is not None else tempfile.gettempdir())
    me, uid = host_name(), os.getuid()
    found = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.startswith(PREFIXES):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        # A symlink or someone else's directory is never ours to remove.
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
            continue
        path = Path(entry.path)
        if owner_dead(path, me=me):
            found.append(path)
    return found


def sweep_tempdirs(root: Path | None = None) -> int:
    """Remove the leftover directories of dead owners; how many went."""
    removed = 0
    for path in leftover_tempdirs(root):
        with contextlib.suppress(OSError):
            shutil.rmtree(path)
            removed += 1
    return removed
