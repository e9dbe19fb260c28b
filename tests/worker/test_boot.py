"""The worker boots light: settings arrive as JSON, heavy imports stay out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pi_workflows.protocol.settings import load_settings, resolve_paths
from pi_workflows.protocol.workerconfig import WorkerConfig


def test_worker_config_round_trips_every_field(tmp_path: Path) -> None:
    settings = load_settings(lease_ms=1234, renew_ms=400, fsync="always", drain_grace_s=2.5)
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


def test_a_process_title_keeps_the_run_marker_readable() -> None:
    """Orphan reaping reads the marker from /proc/<pid>/environ; titles must not blank it."""
    code = ("from pi_workflows.protocol.titles import set_title; "
            "set_title('pi-workflows worker 20990101T000000Z-x-00000000 node=some-long-node'); "
            "import os; print(b'PI_WORKFLOWS_MARKER=k/r/x' in "
            "open(f'/proc/{os.getpid()}/environ', 'rb').read())")
    env = {**os.environ, "PI_WORKFLOWS_MARKER": "k/r/x"}
    out = subprocess.run([sys.executable, "-c", code, "--padding-for-a-long-enough-argv"],
                         capture_output=True, text=True, check=True, timeout=60, env=env)
    assert out.stdout.strip() == "True"
