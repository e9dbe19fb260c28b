"""The self-check behind ``pi-workflows doctor``: one verdict per concern.

Owns the checks (Python, Pi, the store's layout, private permissions, the
host, free disk) and their levels: ``ok``, ``info`` (a neutral fact, such
as no store yet), ``warn`` and ``fail``. Every check only reads: the store
is inspected read-only (never created, never tightened), the host lock is
read from the kernel's lock table rather than locked, and ``pi --version``
is the only process started. Imports ``protocol``, psutil and ``views.wording``
(the commands a check names).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from ...protocol.errors import PiWorkflowsError
from ...protocol.paths import Paths
from ...protocol.pibin import PiUnavailable, find_pi
from ...protocol.settingspec import SettingsLike
from ...protocol.spawn import PIPE, TimeoutExpired, signal_group, spawn
from ...protocol.store import SCHEMA_ID, check_layout, sqlite_version
from ..views.wording import cli

LOW_DISK_BYTES = 100 * 1024 * 1024
PI_TIMEOUT_S = 15.0
MAX_WALK = 200_000  # entries of the runs directory looked at, at most
MAX_LISTED = 100  # loose paths kept in the report


@dataclass(frozen=True)
class Check:
    name: str
    level: str  # ok | info | warn | fail
    message: str
    paths: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"check": self.name, "level": self.level, "message": self.message,
                "paths": list(self.paths)}

    def line(self) -> str:
        level = "FAIL" if self.level == "fail" else self.level
        return f"{level:<4}  {self.name:<11}  {self.message}"


def check_python() -> Check:
    version = ".".join(str(p) for p in sys.version_info[:3])
    return Check("python", "ok", f"Python {version} ({sys.executable}), SQLite {sqlite_version()}")


def check_pi(settings: SettingsLike) -> Check:
    try:
        binary = find_pi(settings.pi_bin)
    except PiUnavailable as exc:
        return Check("pi", "fail", f"{exc}; agent steps, chat and export need it")
    try:
        proc = spawn([binary, "--version"], stdout=PIPE, stderr=PIPE)
    except OSError as exc:
        return Check("pi", "fail", f"{binary} does not start: {exc.strerror or exc}")
    try:
        out, err = proc.communicate(timeout=PI_TIMEOUT_S)
    except TimeoutExpired:
        signal_group(proc, 9)
        proc.wait()
        return Check("pi", "fail", f"`{binary} --version` gave no answer in {PI_TIMEOUT_S:g} s")
    text = (out or err).decode(errors="replace").strip()
    if proc.returncode != 0:
        first = text.splitlines()[0][:200] if text else "no output"
        return Check("pi", "fail", f"`{binary} --version` exited {proc.returncode}: {first}")
    version = text.splitlines()[-1][:80] if text else "?"
    return Check("pi", "ok", f"pi {version} ({binary})")


def check_store(paths: Paths, store_url: str | None = None) -> Check:
    if store_url:
        return _check_pg_store(store_url)
    store = paths.store_file
    if not store.exists() and not store.with_name(store.name + "-wal").exists():
        return Check("store", "info", f"no store yet at {store} (the first run creates it)")
    try:
        schema = check_layout(store)
    except PiWorkflowsError as exc:
        return Check("store", "fail", exc.message, (str(store),))
    if schema is None:
        return Check("store", "warn", f"{store} is empty (a process stopped while creating it;"
                     " the next command lays it out)", (str(store),))
    if schema != SCHEMA_ID:  # a v1 store: the next open upgrades it in place
        return Check("store", "ok", f"{schema} at {store} (the next command upgrades it in"
                     f" place to {SCHEMA_ID}; runs are kept)")
    return Check("store", "ok", f"{schema} at {store}")


def _check_pg_store(url: str) -> Check:
    from ...protocol.settingspec import redact_store_url
    from ...protocol.store.pg import check_pg_layout
    shown = redact_store_url(url)
    try:
        schema = check_pg_layout(url)
    except PiWorkflowsError as exc:
        return Check("store", "fail", exc.message)
    if schema is None:
        return Check("store", "info", f"no store yet in {shown} (the first run lays it out)")
    return Check("store", "ok", f"{schema} in {shown} (PostgreSQL)")


def _loose(path: Path) -> int | None:
    """The mode of ``path`` if group or others have any access; None if private or gone."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode) or not info.st_mode & 0o077:
        return None
    return stat.S_IMODE(info.st_mode)


def _walk(root: Path) -> list[tuple[Path, bool]]:
    """Every directory and file under ``root`` (not following symlinks), bounded."""
    found: list[tuple[Path, bool]] = []
    stack = [root]
    while stack and len(found) < MAX_WALK:
        current = stack.pop()
        with contextlib.suppress(OSError), os.scandir(current) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    found.append((Path(entry.path), True))
                    stack.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    found.append((Path(entry.path), False))
    return found


# The directories a project needs, with the setting that moves each.
_DIRS = (("state_dir", "PI_WORKFLOWS_STATE_DIR"), ("runs_dir", "PI_WORKFLOWS_RUNS_DIR"),
         ("log_dir", "PI_WORKFLOWS_LOG_DIR"))


def check_permissions(paths: Paths) -> Check:
    for field, env in _DIRS:
        path: Path = getattr(paths, field)
        if path.exists() and not path.is_dir():  # a permission fix would not help
            return Check("permissions", "fail", f"{path} ({env}) is not a directory: move the"
                         " file away or point the setting at a directory", (str(path),))
    if not paths.state_dir.exists():
        return Check("permissions", "info", f"nothing to check yet: {paths.state_dir} does not"
                     " exist")
    store = paths.store_file
    dirs = [paths.state_dir, store.parent, paths.runs_dir, paths.log_dir]
    files = [store, store.with_name(store.name + "-wal"), store.with_name(store.name + "-shm"),
             paths.host_lock]
    for root in (paths.runs_dir, paths.log_dir):
        for path, is_dir in _walk(root):
            (dirs if is_dir else files).append(path)
    seen: set[Path] = set()
    loose: list[tuple[Path, str]] = []
    for path, want in [(d, 0o700) for d in dirs] + [(f, 0o600) for f in files]:
        if path in seen:
            continue
        seen.add(path)
        mode = _loose(path)
        if mode is not None:
            loose.append((path, f"{path} ({mode:04o}, want {want:04o})"))
    if not loose:
        return Check("permissions", "ok", f"{paths.state_dir} and everything in it are private"
                     " (directories 0700, files 0600)")
    shown = "; ".join(text for _, text in loose[:3])
    more = f"; and {len(loose) - 3} more" if len(loose) > 3 else ""
    return Check("permissions", "fail", f"{len(loose)} path(s) open to group or others:"
                 f" {shown}{more}; fix with chmod go-rwx",
                 tuple(str(path) for path, _ in loose[:MAX_LISTED]))


def lock_holder(path: Path) -> int | None:
    """The pid holding a ``flock`` on ``path``, from the kernel's lock table (Linux).

    Reading the table takes no lock, so a host starting at this moment is
    never refused because of the check. Without /proc: the pid in the file,
    if it is alive.
    """
    try:
        info = os.stat(path)
    except OSError:
        return None
    try:
        with open("/proc/locks", encoding="ascii") as fh:
            table = fh.read().splitlines()
    except OSError:
        with contextlib.suppress(OSError, ValueError, TypeError):
            pid = int(json.loads(path.read_text() or "{}").get("pid"))
            return pid if psutil.pid_exists(pid) else None
        return None
    want = (os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)
    for line in table:
        parts = line.split()
        if len(parts) < 6 or parts[1] != "FLOCK":  # "->" marks a waiter, not a holder
            continue
        with contextlib.suppress(ValueError):
            major, minor, inode = parts[5].split(":")
            if (int(major, 16), int(minor, 16), int(inode)) == want:
                return int(parts[4])
    return None


def check_host(paths: Paths) -> Check:
    pid = lock_holder(paths.host_lock)
    if pid is None:
        return Check("host", "info", "no host is running for this project (queued runs wait:"
                     f" start one with `{cli(paths.project, 'host', '--background')}`)")
    try:
        details = json.loads(paths.host_lock.read_text() or "{}")
    except (OSError, ValueError):
        details = {}
    ready = isinstance(details, dict) and details.get("ready") is True
    return Check("host", "ok", f"a host is running (pid {pid}{'' if ready else ', starting'})")


def check_disk(paths: Paths) -> Check:
    probe = paths.state_dir
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    size = f"{free / (1 << 30):.1f} GB" if free >= 1 << 30 else f"{free / (1 << 20):.0f} MB"
    if free < LOW_DISK_BYTES:
        gc = cli(paths.project, "gc", "--older-than", blank="DURATION")
        return Check("disk", "warn", f"only {size} free on the filesystem of {probe};"
                     f" the store and bundles need room (`{gc}` frees old runs)")
    return Check("disk", "ok", f"{size} free on the filesystem of {probe}")


def run_checks(settings: SettingsLike, paths: Paths) -> list[Check]:
    return [check_python(), check_pi(settings), check_store(paths, settings.store_url),
            check_permissions(paths), check_host(paths), check_disk(paths)]
