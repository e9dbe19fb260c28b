"""A bundle that can never be written fails its run ``bundle_corrupt`` at the first try.

A bundle path that is a file, or a ``.bundle.lock`` that is a directory, is
not a crash: restarting the worker cannot repair it. A real host
(``pi-workflows host`` as a process, with real worker subprocesses) must
start one worker, fail the run ``bundle_corrupt`` in the queue, spend none
of its crash budget (no ``worker_crash_loop`` three tries later), and
``status`` must show the queue's failure record where the bundle could not
take it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from pi_workflows.protocol.fence import LOCK_NAME
from pi_workflows.worker.control import Control

from tests.helpers.cli import run_cli
from tests.helpers.engine import Harness
from tests.helpers.processes import reap
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.timeout(90)

PLAIN = """
workflow = define_workflow(
    start_at="a",
    nodes=[compute("a", lambda ctx: {"a": 1}), compute("b", lambda ctx: {"b": 2})],
    edges=[edge("a", "b")],
)
"""


def _env(h: Harness) -> dict[str, str]:
    return {**os.environ, "PI_WORKFLOWS_STATE_DIR": str(h.root / "state"),
            "PI_WORKFLOWS_STORE_FILE": str(h.store_path), "PI_WORKFLOWS_RUNS_DIR": str(h.runs),
            "PI_WORKFLOWS_RESTART_BACKOFF_S": "0.05", "PI_WORKFLOWS_POLL_INTERVAL_S": "0.1"}


def _host_until_settled(h: Harness, run_id: str) -> str:
    """Run a real host until ``run_id`` is terminal in the queue; its output."""
    log = h.root / "host.out"
    with open(log, "wb") as out:
        host = subprocess.Popen([sys.executable, "-m", "pi_workflows", "host", "--project",
                                 str(h.project)], env=_env(h), stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: h.row(run_id).state in ("failed", "done", "cancelled"), 60,
                 "the run to end", diag=log.read_text)
        host.send_signal(signal.SIGTERM)
        host.wait(30)
    finally:
        reap(host)
    return log.read_text()


def _assert_failed_once(h: Harness, run_id: str, text: str) -> None:
    row = h.row(run_id)
    assert (row.state, row.error_code) == ("failed", "bundle_corrupt"), text
    assert text.count(f"run {run_id} -> worker pid") == 1, text  # no restart
    assert "crashed" not in text and "worker_crash_loop" not in text, text
    shown = run_cli("status", run_id, "--json", env=_env(h), cwd=h.project)
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert status["queueState"] == "failed", status
    assert status["errorCode"] == "bundle_corrupt", status


def test_a_bundle_path_that_is_a_file_fails_at_the_first_try(h: Harness) -> None:
    h.write("plain", PLAIN)
    run_id = h.launch("plain")
    h.runs.mkdir(parents=True, exist_ok=True)
    h.bundle(run_id).dir.write_text("not a directory")
    text = _host_until_settled(h, run_id)
    _assert_failed_once(h, run_id, text)
    assert h.bundle(run_id).dir.read_text() == "not a directory"  # left as it was


def test_a_lock_that_is_a_directory_fails_at_the_first_try(h: Harness) -> None:
    h.write("plain", PLAIN)
    run_id = h.launch("plain")
    parking = Control()
    parking.request_park()
    assert h.execute(run_id, control=parking).outcome == "parked"
    lock = h.bundle(run_id).dir / LOCK_NAME
    lock.unlink()
    lock.mkdir()
    text = _host_until_settled(h, run_id)
    _assert_failed_once(h, run_id, text)
    # The bundle could not record it (its lock cannot be taken): the queue's
    # record is the truth, and the human status says so too.
    human = run_cli("status", run_id, env=_env(h), cwd=h.project)
    assert f"{run_id}  plain  failed/running [bundle_corrupt] " in human.stdout, human.stdout
