"""The installed package imports and the CLI answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_paths_json_lists_every_location(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pi_workflows", "paths", "--project", str(tmp_path), "--json"],
        capture_output=True, text=True, check=True, timeout=60,
    )
    data = json.loads(out.stdout)
    assert set(data) == {"home", "stateDir", "storeFile", "runsDir", "hostLock", "logDir"}
    assert data["storeFile"].startswith(data["stateDir"])
