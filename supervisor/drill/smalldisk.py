"""A small tmpfs for a drill's runs directory, and filling it to the last byte.

Owns mounting a size-limited tmpfs (``mount -t tmpfs``, which needs root or
CAP_SYS_ADMIN; where it is refused the caller is told why, in one line, and
nothing else happens), unmounting it again (lazily if it is still busy),
and the filler: a file written until the filesystem says ``ENOSPC``, then
removed. The drill's ``runs_disk_full`` fault and the tests of a full runs
directory use it. Imports ``protocol.spawn`` only; never the worker.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from ...protocol.spawn import PIPE, spawn

DEFAULT_SIZE = 64 * 1024 * 1024
CHUNK = 64 * 1024


def _command(*argv: str) -> tuple[int, str]:
    try:
        proc = spawn(list(argv), stdout=PIPE, stderr=PIPE)
    except OSError as exc:  # no mount(8) here at all
        return 127, f"{argv[0]}: {exc.strerror or exc}"
    out, err = proc.communicate(timeout=30)
    text = (err or out or b"").decode(errors="replace").strip().splitlines()
    return proc.returncode, text[-1] if text else f"exit {proc.returncode}"


def mount_tmpfs(mount: Path, size: int = DEFAULT_SIZE) -> str | None:
    """Mount a tmpfs of ``size`` bytes (0700) at ``mount``; None, or why it cannot be."""
    mount.mkdir(mode=0o700, parents=True, exist_ok=True)
    code, text = _command("mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                          str(mount))
    return None if code == 0 else f"cannot mount a tmpfs at {mount}: {text}"


def unmount(mount: Path) -> None:
    """Unmount ``mount`` if something is mounted there (lazily when it is busy)."""
    if not os.path.ismount(mount):
        return
    code, _ = _command("umount", str(mount))
    if code != 0:
        _command("umount", "-l", str(mount))


def fill(path: Path) -> int:
    """Write ``path`` (0600) until its filesystem is full; the bytes it took."""
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (CHUNK, 4096, 1):  # the last bytes in smaller writes
            chunk = bytes(size)
            while True:
                try:
                    written += os.write(fd, chunk)
                except OSError as exc:
                    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    break
    finally:
        os.close(fd)
    return written


def free(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
