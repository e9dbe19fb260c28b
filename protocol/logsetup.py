"""Logging setup: loguru to stderr and a rotating file in the log directory.

One function, called once per process. Callers never pass private input,
prompts or secrets to the logger; messages that may carry provider text go
through ``limits.safe_error_message`` first. The file sink is our own small
rotating writer: when the disk is full (or the file cannot be written) it
says so in one line on stderr, at most once a minute, and drops log lines
instead of printing a traceback for each. Imports loguru and
``protocol.paths`` only.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from loguru import logger

from .paths import ensure_private_dir

LOG_FILE = "pi-workflows.log"
ROTATE_BYTES = 10 * 1024 * 1024
KEEP = 5
COMPLAIN_EVERY_S = 60.0


class RotatingFile:
    """Append lines to ``path`` (0600); past ``rotate_bytes`` keep ``keep`` old files."""

    def __init__(self, path: Path, *, rotate_bytes: int = ROTATE_BYTES, keep: int = KEEP,
                 complain: Any = None) -> None:
        self.path = path
        self.rotate_bytes = rotate_bytes
        self.keep = keep
        self._lock = threading.Lock()
        self._complained = 0.0
        self._complain = complain or (lambda text: sys.stderr.write(text))

    def _rotate(self) -> None:
        for i in range(self.keep - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{i}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{i + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))

    def write(self, message: Any) -> None:
        data = str(message).encode("utf-8", errors="replace")
        with self._lock:
            try:
                with contextlib.suppress(FileNotFoundError):
                    if self.path.stat().st_size + len(data) > self.rotate_bytes:
                        self._rotate()
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
            except OSError as exc:
                now = time.monotonic()
                if now - self._complained >= COMPLAIN_EVERY_S:
                    self._complained = now
                    why = "the disk is full" if exc.errno == 28 else (exc.strerror or exc)
                    with contextlib.suppress(OSError):
                        self._complain(f"pi-workflows: cannot write the log file {self.path}:"
                                       f" {why}; log lines are dropped until it can\n")


def setup_logging(log_dir: Path | None, *, level: str = "INFO", stderr_level: str = "WARNING",
                  role: str = "cli") -> None:
    """Route logs to stderr (``stderr_level``) and ``<log_dir>/pi-workflows.log``."""
    logger.remove()
    logger.configure(extra={"role": role})
    fmt = "{time:YYYY-MM-DD HH:mm:ss.SSS} {level:<7} {extra[role]}[{process}] {message}"
    logger.add(sys.stderr, level=stderr_level, format=fmt, backtrace=False, diagnose=False,
               catch=True)
    if log_dir is not None:
        ensure_private_dir(log_dir)
        logger.add(RotatingFile(log_dir / LOG_FILE).write, level=level, format=fmt,
                   backtrace=False, diagnose=False, catch=True)
