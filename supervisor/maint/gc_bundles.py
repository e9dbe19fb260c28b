"""The disk side of ``pi-workflows gc``: finding, guarding and removing run bundles.

Owns what gc may touch under the runs directory and how it goes without a
trace of half a bundle: a bundle is only ever a real directory named by its
run id directly in the runs directory, on its filesystem, that looks like a
bundle (``bundle_dir``); it is moved whole into ``.gc/trash`` (one rename)
and only then deleted, so a reader sees it complete or not at all. Also the
journal of the run ids a gc is removing (written, fsynced, before any row
is deleted, so a rerun after ``kill -9`` knows which leftover bundles are
its to finish), the lock that keeps two gcs apart, and which runs a live
process still uses. Imports ``protocol`` and psutil.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil

from ...protocol.atomic import write_json_atomic
from ...protocol.errors import ConflictError, UsageError
from ...protocol.fence import LOCK_NAME
from ...protocol.paths import ensure_private_dir
from ...protocol.wire import MARKER_ENV, parse_marker

GC_DIR = ".gc"  # run ids start with a letter or digit, so this is never a bundle
# What a bundle holds (protocol/bundle.py); a directory without a manifest
# must hold nothing else to count as one (a bundle whose creation stopped).
_BUNDLE_ENTRIES = frozenset({"manifest.json", "workflow.json", "state.json", "state.ndjson",
                             "trace.ndjson",
                             "processes.json", "session", "artifacts", LOCK_NAME})


class NotABundle(Exception):
    """The path is not something gc may delete; the message says why."""


def gc_dir(runs_dir: Path) -> Path:
    return runs_dir / GC_DIR


def bundle_dir(runs_dir: Path, run_id: str) -> Path | None:
    """The run's bundle directory if it is safe to delete; None if there is none."""
    path = runs_dir / run_id
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise NotABundle(f"{path} is not a real directory")
    if info.st_dev != os.stat(runs_dir).st_dev:
        raise NotABundle(f"{path} is on another filesystem")
    manifest = path / "manifest.json"
    try:
        minfo = os.lstat(manifest)
    except FileNotFoundError:
        names = os.listdir(path)
        extra = [n for n in names if n not in _BUNDLE_ENTRIES and not n.endswith(".tmp")]
        if extra:
            raise NotABundle(f"{path} has no manifest and holds {extra[0]!r}") from None
        return path
    if not stat.S_ISREG(minfo.st_mode):
        raise NotABundle(f"{manifest} is not a regular file")
    try:
        with open(manifest, encoding="utf-8") as fh:
            owner = json.load(fh).get("runId")
    except (OSError, ValueError, AttributeError):
        raise NotABundle(f"{manifest} is unreadable") from None
    if owner != run_id:
        raise NotABundle(f"{manifest} names another run ({owner!r})")
    return path


def tree_bytes(path: Path) -> int:
    """Bytes under ``path``, never following a symlink."""
    total = 0
    for root, dirs, files in os.walk(path, followlinks=False):
        for name in dirs + files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def lock_bundle(path: Path) -> int | None:
    """Take the run's bundle lock without waiting; its fd, None if it has no lock file.

    Every bundle writer holds it while it writes, so a held lock means
    someone is writing (or stuck writing): gc leaves the run for next time.
    """
    try:
        fd = os.open(path / LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise NotABundle(f"{path / LOCK_NAME} cannot be opened ({exc.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise
    return fd


def discard(runs_dir: Path, path: Path, pause: Callable[[], None] | None = None) -> None:
    """Move the bundle into the trash in one rename, then delete it there."""
    trash = ensure_private_dir(gc_dir(runs_dir) / "trash")
    target = trash / f"{path.name}.{os.getpid()}"
    try:
        os.rename(path, target)
    except FileNotFoundError:
        return  # another gc got there first
    if pause is not None:
        pause()
    shutil.rmtree(target)


def empty_trash(runs_dir: Path) -> int:
    """Delete what a killed gc left in the trash; how many entries."""
    trash = gc_dir(runs_dir) / "trash"
    try:
        names = os.listdir(trash)
    except FileNotFoundError:
        return 0
    for name in names:
        entry = trash / name
        if os.path.islink(entry) or not entry.is_dir():
            entry.unlink()
        else:
            shutil.rmtree(entry)
    return len(names)


# ---- the journal and the lock ---------------------------------------------------


def read_journal(runs_dir: Path) -> list[str]:
    try:
        with open(gc_dir(runs_dir) / "journal.json", encoding="utf-8") as fh:
            ids = json.load(fh).get("runIds", [])
    except FileNotFoundError:
        return []
    except (OSError, ValueError, AttributeError):
        return []  # torn before its rename: nothing was deleted after it
    return [i for i in ids if isinstance(i, str)]


def write_journal(runs_dir: Path, run_ids: list[str], now: int) -> None:
    path = ensure_private_dir(gc_dir(runs_dir)) / "journal.json"
    write_json_atomic(path, {"runIds": run_ids, "startedAt": now}, sync=True)


def clear_journal(runs_dir: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(gc_dir(runs_dir) / "journal.json")


@contextlib.contextmanager
def gc_lock(runs_dir: Path) -> Iterator[None]:
    """One gc at a time per project (a kernel lock: a killed gc frees it)."""
    if runs_dir.exists() and not runs_dir.is_dir():
        raise UsageError(f"the runs directory {runs_dir} is not a directory"
                         " (PI_WORKFLOWS_RUNS_DIR)", code="runs_dir_invalid")
    fd = os.open(ensure_private_dir(gc_dir(runs_dir)) / "lock",
                 os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConflictError("another `pi-workflows gc` is running for this project;"
                                " let it finish", code="gc_running") from None
        yield
    finally:
        os.close(fd)


# ---- runs a live process still uses ------------------------------------------------


def runs_in_use(runs_dir: Path, project_key: str) -> set[str]:
    """Run ids a live process works on: a worker or agent (by its run marker), or
    anything with a path inside a bundle on its command line (``chat``'s Pi)."""
    prefix = str(runs_dir) + os.sep
    me = os.getpid()
    found: set[str] = set()
    for proc in psutil.process_iter(["cmdline"]):
        if proc.pid == me:
            continue
        for arg in proc.info.get("cmdline") or ():
            if isinstance(arg, str) and arg.startswith(prefix):
                found.add(arg[len(prefix):].split(os.sep, 1)[0])
        try:
            marker = parse_marker(proc.environ().get(MARKER_ENV), project_key)
        except (psutil.Error, OSError):
            continue
        if marker is not None:
            found.add(marker[1])
    return found
