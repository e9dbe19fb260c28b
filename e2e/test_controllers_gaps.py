"""Controllers under a real host, where a reconcile or a controller file misbehaves.

A reconcile that kills its own worker every pass is retried with backoff
(each abandoned pass is an error attempt); a file that ends the process at
import stops the worker restarts until it changes; ``controller events
--follow`` shows a pass as it happens and exits 0 on Ctrl-C; a child run
whose worker is stopped (SIGSTOP) is interrupted, not resumed.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from .harness import Project, wait_for

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

SUICIDE = '''
import os
from pi_workflows import define_controller


def reconcile(ctx, r):
    os._exit(3)  # the worker dies inside every pass: no outcome is ever written


controller = define_controller(name="doomed", initial_status=lambda spec: {},
                               reconcile=reconcile, timeout=30)
'''


def _write(project: Project, name: str, source: str) -> Path:
    wf = project.root / ".pi" / "workflows"
    wf.mkdir(parents=True, exist_ok=True)
    path = wf / name
    path.write_text(source)
    return path


def _events(project: Project, controller: str, key: str) -> list[dict]:
    proc = project.cli("controller", "get", controller, key, "--json", check=False)
    return json.loads(proc.stdout)["events"] if proc.returncode == 0 else []


def _diag(project: Project):
    return lambda: "\n".join(project.log_lines()[-40:])


def test_a_reconcile_that_kills_its_worker_backs_off(project: Project) -> None:
    project.env["PI_WORKFLOWS_CONTROLLER_WORKERS"] = "1"
    _write(project, "doomed.controller.py", SUICIDE)
    project.start_host()
    project.cli("controller", "apply", "doomed", "a", "--spec-json", "{}")

    def three_abandoned() -> list[dict] | None:
        errors = [e for e in _events(project, "doomed", "a") if e["type"] == "error"]
        return errors if len(errors) >= 3 else None

    errors = wait_for(three_abandoned, 120, what="three abandoned passes", diag=_diag(project))
    assert [e["data"]["attempts"] for e in errors[:3]] == [1, 2, 3]
    assert {e["data"]["reason"] for e in errors} <= {"lease_expired", "runner_dead"}
    for e in errors[:3]:  # each waits out its backoff: 1 s doubling, -20 % at most
        wait_ms = e["data"]["dueAt"] - e["at"]
        assert wait_ms >= 0.8 * 1000 * 2 ** (e["data"]["attempts"] - 1), e
    starts = [e for e in _events(project, "doomed", "a") if e["type"] == "reconcile_started"]
    assert [e["data"]["attempts"] for e in starts[:3]] == [0, 1, 2]
    for before, after in zip(errors[:2], starts[1:3], strict=True):
        assert after["at"] >= before["data"]["dueAt"]  # never claimed before it was due


BROKEN = '''
import os
os._exit(7)  # the process ends while the file is imported
'''

FIXED = '''
from pi_workflows import define_controller

controller = define_controller(name="broken", initial_status=lambda spec: {},
                               reconcile=lambda ctx, r: ctx.settled(), timeout=30)
'''


def test_a_file_that_exits_at_import_stops_the_restarts_until_it_changes(
        project: Project) -> None:
    project.env["PI_WORKFLOWS_CONTROLLER_WORKERS"] = "2"
    project.env["PI_WORKFLOWS_CRASH_LIMIT"] = "3"
    path = _write(project, "broken.controller.py", BROKEN)
    project.start_host()

    def halted() -> dict | None:
        got = json.loads(project.cli("controllers", "--json").stdout)
        return got if got["workersHalted"] else None

    got = wait_for(halted, 90, what="the crash loop to halt", diag=_diag(project))
    assert got["workersHalted"]["crashes"] == 3 and got["workersHalted"]["lastExit"] == 7
    assert [e["name"] for e in got["errors"]] == ["broken"]  # the file that fails, named
    lines = [line for line in project.log_lines() if "not restarted until" in line]
    assert len(lines) == 1 and "broken.controller.py" in lines[0], lines
    listing = project.cli("controller", "list")
    assert "stopped restarting its controller workers" in listing.stdout
    spawned = sum("controller worker" in line and "-> pid" in line
                  for line in project.log_lines())
    # The third crash halts; the other slot's worker already started then dies unreplaced.
    assert spawned <= 3 + 2 - 1, spawned

    path.write_text(FIXED)  # a change: the host starts the workers again
    wait_for(lambda: not halted(), 60, what="the halt to clear", diag=_diag(project))
    project.cli("controller", "apply", "broken", "a", "--spec-json", "{}")

    def settled() -> bool:
        return any(e["type"] == "settled" for e in _events(project, "broken", "a"))

    wait_for(settled, 60, what="a reconcile after the fix", diag=_diag(project))
    assert "stopped restarting" not in project.cli("controller", "list").stdout


QUICK = '''
from pi_workflows import define_controller

controller = define_controller(name="quick", initial_status=lambda spec: {},
                               reconcile=lambda ctx, r: ctx.settled(), timeout=30)
'''


def test_events_follow_shows_a_pass_as_it_happens_and_ctrl_c_exits_0(
        project: Project) -> None:
    import signal
    import subprocess
    import sys

    from .harness import LineReader

    project.env["PI_WORKFLOWS_CONTROLLER_WORKERS"] = "1"
    _write(project, "quick.controller.py", QUICK)
    project.cli("controller", "apply", "quick", "a", "--spec-json", "{}")  # no host yet
    follow = subprocess.Popen(
        [sys.executable, "-m", "pi_workflows", "controller", "events", "quick", "a",
         "--follow", "--json", "--project", str(project.root)],
        env=project.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        lines = LineReader(follow.stdout)  # type: ignore[arg-type]
        first = json.loads(lines.next(60, "the events so far"))
        assert first["type"] == "applied"
        project.start_host()  # the pass happens while the command follows
        seen = [json.loads(lines.next(60, f"event {n}"))["type"] for n in range(2)]
        while "settled" not in seen:
            seen.append(json.loads(lines.next(60, "settled"))["type"])
        assert "reconcile_started" in seen
        assert seen.index("reconcile_started") < seen.index("settled")
        follow.send_signal(signal.SIGINT)  # Ctrl-C
        assert follow.wait(30) == 0, follow.stderr.read() if follow.stderr else ""
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()


def test_a_child_run_whose_worker_stops_renewing_gets_a_new_attempt(project: Project) -> None:
    import os
    import signal

    from .test_controllers import HOLDING_REPORT, _apply, _install, _read, _ready_at

    _install(project)
    (project.root / ".pi" / "workflows" / "filesync-report.workflow.py").write_text(
        HOLDING_REPORT)
    (project.root / ".hold-report").write_text("")
    project.start_host()
    _apply(project, "s", {"path": "out/s.txt", "text": "S"})
    pid = int(wait_for(lambda: _read(project.root / ".in-report"), 60, what="s's report runs",
                       diag=_diag(project)))
    os.kill(pid, signal.SIGSTOP)  # the child run's worker: alive, renewing nothing
    try:
        got = wait_for(lambda: _ready_at(project, "s", 1), 90,
                       what="s Ready after a new attempt", diag=_diag(project))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    attempts = [(c["attempt"], c["state"], c["runState"]) for c in got["children"]]
    assert attempts == [(1, "interrupted", "failed"), (2, "queued", "done")], attempts
    assert any("stopped renewing its lease" in line for line in project.log_lines())
