"""Finding the Pi coding agent binary, for agent steps, ``chat`` and ``export``.

Owns the lookup order: the ``PI_WORKFLOWS_PI_BIN`` setting, then the
project-local install next to the package (what ``scripts/setup`` puts in
``node_modules/``), then ``pi`` on ``PATH``. Imports nothing from the package.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

SESSION_FILE = "pi-session.jsonl"  # a run's conversation, in its bundle's session/


class PiUnavailable(Exception):
    """Pi is missing or will not start; the message says how to fix it."""


def find_pi(configured: str | None) -> str:
    if configured:
        found = shutil.which(configured) or (configured if os.path.isfile(configured) else None)
        if found is None:
            raise PiUnavailable(f"pi not found at {configured} (PI_WORKFLOWS_PI_BIN)")
        return found
    # The protocol package sits beside node_modules in a checkout (package-dir).
    local = Path(__file__).resolve().parents[1] / "node_modules" / ".bin" / "pi"
    if local.is_file():
        return str(local)
    on_path = shutil.which("pi")
    if on_path:
        return on_path
    raise PiUnavailable("pi not found: run scripts/setup or set PI_WORKFLOWS_PI_BIN")
