"""The worker boots light: settings arrive as JSON, heavy imports stay out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pi_workflows.protocol.settings import load_settings, resolve_paths
from pi_workflows.protocol.workerconfig import WorkerConfig


def test_worker_config_round_trips_every_field(tmp_path: Path) -> None:
    settings = load_settings(lease_ms=1234, fsync="always", park_grace_s=2.5)
    config = WorkerConfig.from_settings(settings, resolve_paths(settings, tmp_path))
    assert WorkerConfig.from_json(config.to_json()) == config
    assert config.lease_ms == 1234 and config.fsync == "always"
    assert config.paths.project == tmp_path.resolve()


def test_the_worker_module_imports_no_settings_machinery_or_logger() -> None:
    code = ("import sys, pi_workflows.worker.process as p; "
            "print(sorted(m for m in ('pydantic', 'pydantic_settings', 'loguru', 'typer')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"
