"""Crash-safe file writes for bundles: private modes, temp + rename, fsync.

Owns the low-level durability primitives every bundle write uses. Imports
nothing from the package.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

FILE_MODE = 0o600


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path: Path, flags: int, data: bytes, *, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, sync: bool, sync_dir: bool = True) -> None:
    """Replace ``path`` with ``data``: a reader sees the old or the new file, never half.

    ``sync_dir=False`` leaves the directory fsync to a later write in the same
    directory (several files laid out together need only one).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    _write_file(tmp, os.O_TRUNC, data, sync=sync)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sync and sync_dir:
        fsync_dir(path.parent)


def write_json_atomic(path: Path, value: Any, *, sync: bool, sync_dir: bool = True) -> None:
    write_atomic(path, (json.dumps(value, indent=1, sort_keys=True) + "\n").encode(), sync=sync,
                 sync_dir=sync_dir)


def append_line(path: Path, line: bytes, *, sync: bool) -> None:
    """Append one complete line with a single write(2) on an O_APPEND descriptor."""
    _write_file(path, os.O_APPEND, line, sync=sync)


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)
