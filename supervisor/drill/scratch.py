"""The scratch project a drill creates and owns.

Owns claiming a directory (refused when it holds files the drill did not
create; the drill's own carry the marker file ``.pi-workflows-drill``),
the environment every process of the drill gets (this process's, without
any caller ``PI_WORKFLOWS_*`` setting, with the drill's short leases and a
home inside the directory, so the store and the bundles are the drill's
too), the project's paths, and spawning ``pi-workflows`` commands in it.
With ``small_runs`` the runs directory lives on a small tmpfs of its own,
mounted at ``DIR/.runsdisk`` (for the ``runs_disk_full`` fault) and
unmounted by ``release``; where mounting is refused, the runs stay where
they are and ``small_runs_skipped`` says why. Imports ``protocol`` and the
drill's ``smalldisk``; never the worker.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import IO, Any

from ...protocol.errors import UsageError
from ...protocol.paths import Paths, ensure_private_dir, resolve_paths
from ...protocol.spawn import DEVNULL, Popen, spawn
from .smalldisk import mount_tmpfs, unmount

MARKER = ".pi-workflows-drill"
# Where the small tmpfs of the runs directory is mounted, inside DIR.
RUNS_DISK = ".runsdisk"
RUNS_DISK_BYTES = 64 * 1024 * 1024
KEPT_RUNS = ".runs-kept"
PREFIX = "PI_WORKFLOWS_"
# Short leases and polls so a lost worker is noticed in about two seconds, and a
# crash budget wide enough that repeated kills of one run rarely end it.
DRILL_SETTINGS = {
    "PI_WORKFLOWS_LEASE_MS": "2000",
    "PI_WORKFLOWS_RENEW_MS": "400",
    "PI_WORKFLOWS_POLL_INTERVAL_S": "0.2",
    "PI_WORKFLOWS_HUNG_KILL_AFTER_S": "1",
    "PI_WORKFLOWS_DRAIN_GRACE_S": "3",
    "PI_WORKFLOWS_RESTART_BACKOFF_S": "0.1",
    "PI_WORKFLOWS_CRASH_LIMIT": "10",
    # Two controller workers (of the default four): two cores run the whole drill.
    "PI_WORKFLOWS_CONTROLLER_WORKERS": "2",
    # The drill kills processes, never the machine: fsync buys nothing here.
    "PI_WORKFLOWS_FSYNC": "never",
}
# Settings of the caller that the drill keeps: where Pi is.
KEPT = ("PI_WORKFLOWS_PI_BIN",)


def _private_dir(path: Path) -> None:
    # The rule of every private directory: never a link, never another user's,
    # and no chmod through one (a --project in a shared place could be either).
    ensure_private_dir(path)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` as a 0600 file (replacing it)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(path, 0o600)


def claim_directory(root: Path, seed: int) -> None:
    """Make ``root`` the drill's: new, empty, or a former drill's (emptied again).

    Anything else is refused with one line before anything is written.
    """
    if root.exists() and not root.is_dir():
        raise UsageError(f"--project {root} is not a directory")
    entries = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
    if entries and MARKER not in entries:
        shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
        raise UsageError(f"--project {root} holds files the drill did not create ({shown});"
                         " give a new or empty directory")
    _private_dir(root)
    unmount(root / RUNS_DISK)  # left mounted by a drill that was killed
    for name in entries:  # a former drill's scratch: start from nothing
        if name == MARKER:
            continue
        path = root / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    write_private(root / MARKER, json.dumps({"createdBy": "pi-workflows drill",
                                             "seed": seed}) + "\n")


@dataclass
class Scratch:
    """The drill's project directory, its environment and paths."""

    root: Path
    env: dict[str, str]
    paths: Paths
    # The runs directory's own tmpfs (None: the runs are on DIR's filesystem).
    runs_disk: Path | None = None
    small_runs_skipped: str | None = None  # why no tmpfs could be mounted

    @classmethod
    def create(cls, root: Path, seed: int, extra: dict[str, str] | None = None, *,
               small_runs: bool = False) -> Scratch:
        root = root.expanduser().absolute()
        claim_directory(root, seed)
        for sub in ("drill", "home"):
            _private_dir(root / f".{sub}")
        env = {k: v for k, v in os.environ.items() if not k.startswith(PREFIX) or k in KEPT}
        env.update(DRILL_SETTINGS)
        env[f"{PREFIX}HOME"] = str(root / ".home")
        env.update(extra or {})
        disk, skipped, runs_dir = None, None, None
        if small_runs:
            skipped = mount_tmpfs(root / RUNS_DISK, RUNS_DISK_BYTES)
            if skipped is None:
                # A directory inside the mount: the filler lives beside it, never
                # among the bundles.
                disk, runs_dir = root / RUNS_DISK, root / RUNS_DISK / "runs"
                env[f"{PREFIX}RUNS_DIR"] = str(runs_dir)
        paths = resolve_paths(SimpleNamespace(home=root / ".home", state_dir=None,
                                              store_file=None, runs_dir=runs_dir,
                                              host_lock=None, log_dir=None), root)
        return cls(root, env, paths, disk, skipped)

    def release(self) -> None:
        """Unmount the runs directory's tmpfs, its bundles copied out first as evidence.

        The copy, ``DIR/.runs-kept``, is what a person reads after the drill
        (``PI_WORKFLOWS_RUNS_DIR=DIR/.runs-kept pi-workflows status RUN``).
        """
        if self.runs_disk is None:
            return
        try:
            if self.paths.runs_dir.is_dir():
                shutil.copytree(self.paths.runs_dir, self.root / KEPT_RUNS, symlinks=True,
                                dirs_exist_ok=True)
        except (OSError, shutil.Error):
            pass  # evidence only: the unmount must happen whatever the copy did
        finally:
            unmount(self.runs_disk)
            self.runs_disk = None

    @property
    def work(self) -> Path:
        """The drill's own files: logs of its children, the delivery journal."""
        return self.root / ".drill"

    @property
    def ledger(self) -> Path:
        """Where the workflows' guarded shell effects append, outside every bundle."""
        return self.root / "ledger.txt"

    @property
    def lease_ms(self) -> int:
        return int(self.env["PI_WORKFLOWS_LEASE_MS"])

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "pi_workflows", *args, "--project", str(self.root)]

    def drop(self) -> list[str]:
        """Names of this process's environment the drill's children must not get."""
        return [k for k in os.environ if k.startswith(PREFIX) and k not in self.env]

    def spawn(self, *args: str, log: str = "cli.log", stdin: Any = DEVNULL,
              stdout: IO[Any] | int | None = None) -> Popen[bytes]:
        """``pi-workflows ARGS`` as a child in its own session, output to ``log``."""
        with open(self.work / log, "ab") as out:
            os.chmod(out.name, 0o600)
            return spawn(self.argv(*args), env=self.env, drop_env=self.drop(), stdin=stdin,
                         stdout=stdout if stdout is not None else out, stderr=out)
