"""Logging setup: loguru to stderr and a rotating file in the log directory.

One function, called once per process. Callers never pass private input,
prompts or secrets to the logger; messages that may carry provider text go
through ``limits.safe_error_message`` first. Imports loguru and
``protocol.paths`` only.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from loguru import logger

from .paths import ensure_private_dir

LOG_FILE = "pi-workflows.log"


def _private_opener(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)


def setup_logging(log_dir: Path | None, *, level: str = "INFO", stderr_level: str = "WARNING",
                  role: str = "cli") -> None:
    """Route logs to stderr (``stderr_level``) and ``<log_dir>/pi-workflows.log``."""
    logger.remove()
    logger.configure(extra={"role": role})
    fmt = "{time:YYYY-MM-DD HH:mm:ss.SSS} {level:<7} {extra[role]}[{process}] {message}"
    logger.add(sys.stderr, level=stderr_level, format=fmt, backtrace=False, diagnose=False)
    if log_dir is not None:
        ensure_private_dir(log_dir)
        kwargs: dict[str, Any] = {"opener": _private_opener}
        logger.add(
            str(log_dir / LOG_FILE), level=level, format=fmt, rotation="10 MB", retention=5,
            enqueue=False, backtrace=False, diagnose=False, encoding="utf-8", **kwargs,
        )
