"""What ``cancel`` tells a person about a running run: its step is stopped now, not later."""

from __future__ import annotations

from pathlib import Path

from pi_workflows.protocol.paths import resolve_paths
from pi_workflows.protocol.settings import load_settings
from pi_workflows.protocol.store import Store

from tests.helpers.cli import run_cli
from tests.helpers.store import put_in_state


def test_cancel_no_wait_of_a_running_run_says_the_step_in_progress_is_stopped(
        tmp_path: Path) -> None:
    paths = resolve_paths(load_settings(), tmp_path)
    paths.store_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    run_id = "20990101T000000Z-demo-0000abcd"
    with Store(paths.store_file) as store:
        put_in_state(store, run_id, "running")  # its runner has no worker: nothing stops it
    done = run_cli("cancel", run_id, "--no-wait", "--project", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "the step in progress is being stopped and no step starts after it" in done.stdout
    assert "next node boundary" not in done.stdout  # the cancel does not wait for one
