"""Controllers under a real host: the worked example (examples/filesync.controller.py).

Apply a spec and the file appears, change it and the file follows, delete
and the file goes with the resource (finalizer); each change's report runs
as an ordinary child run. Kill -9 of a controller worker inside ``apply``
and of the host between the effect record and the status write: no applied
effect repeated, every resource settles.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import psutil
import pytest

from .harness import Project, wait_for

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _install(project: Project, extra: str = "") -> None:
    wf = project.root / ".pi" / "workflows"
    wf.mkdir(parents=True, exist_ok=True)
    source = (EXAMPLES / "filesync.controller.py").read_text()
    (wf / "filesync.controller.py").write_text(source + extra)
    shutil.copy(EXAMPLES / "filesync-report.workflow.py", wf / "filesync-report.workflow.py")


def _apply(project: Project, key: str, spec: dict) -> None:
    project.cli("controller", "apply", "filesync", key, "--spec-json", json.dumps(spec))


def _get(project: Project, key: str) -> dict:
    proc = project.cli("controller", "get", "filesync", key, "--json", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else {}


def _ready_at(project: Project, key: str, generation: int) -> dict | None:
    got = _get(project, key)
    ready = got.get("ready", {})
    if ready.get("status") == "true" and got["status"].get("observed_generation") == generation:
        return got
    return None


def _diag(project: Project):
    return lambda: "\n".join(project.log_lines()[-40:])


def _applied_writes(got: dict) -> list[str]:
    return [e["effectKey"] for e in got["effects"] if e["effectKey"].startswith("write-")]


def test_the_filesync_example_follows_its_spec_and_deletes(project: Project) -> None:
    _install(project)
    project.start_host()
    target = project.root / "synced" / "notes.txt"
    _apply(project, "notes", {"path": "synced/notes.txt", "text": "hello"})
    got = wait_for(lambda: _ready_at(project, "notes", 1), 60, what="notes Ready at 1",
                   diag=_diag(project))
    assert target.read_text() == "hello"
    child = got["children"][0]
    assert child["runState"] == "done" and child["workflow"] == "filesync-report"
    runs = json.loads(project.cli("list", "--json").stdout)
    mine = [r for r in runs["runs"] if r["runId"] == child["runId"]]
    assert mine and mine[0]["controller"]["key"] == "notes", runs
    # Piped, list is 120 columns wide: the detail may be cut after its start.
    [row] = [line for line in project.cli("list").stdout.splitlines()
             if line.startswith(child["runId"])]
    assert "(controller filesyn" in row, row
    shown = project.cli("status", child["runId"]).stdout
    assert "controller filesync/notes: request report-1, attempt 1" in shown, shown
    _apply(project, "notes", {"path": "synced/notes.txt", "text": "changed"})
    got = wait_for(lambda: _ready_at(project, "notes", 2), 60, what="notes Ready at 2",
                   diag=_diag(project))
    assert target.read_text() == "changed"
    assert _applied_writes(got) == ["write-1-0", "write-2-1"]
    listed = project.cli("controller", "list").stdout
    assert "filesync/notes  Ready=true" in listed
    project.cli("controller", "delete", "filesync", "notes")
    wait_for(lambda: not _get(project, "notes"), 60, what="notes deleted", diag=_diag(project))
    assert not target.exists()
    titles = [" ".join(p.cmdline()) for p in psutil.process_iter() if _mine(p, project)]
    assert any("pi-workflows controller" in t for t in titles), titles


def _mine(proc: psutil.Process, project: Project) -> bool:
    try:
        return str(project.root.name) in " ".join(proc.cmdline())
    except psutil.Error:
        return False


# A write that holds inside apply (after its record is pending) until the test
# lets it go, and a pass that holds after the effect is applied, before the status
# write: the test kills -9 the process at each.
HOLDS = '''

import time as _time
from pathlib import Path as _Path

_real_write, _real_reconcile = _write, reconcile


def _write(request):
    flag = _Path(".hold-apply")
    if flag.exists():
        flag.unlink()
        _Path(".in-apply").write_text(str(__import__("os").getpid()))
        _time.sleep(120)
    with open("writes.log", "a") as log:  # every write that really ran
        log.write(request["path"] + "\\n")
    return _real_write(request)


def reconcile(ctx, resource):
    real_ensure = ctx.effects.ensure

    def ensure(**kw):
        out = real_ensure(**kw)
        flag = _Path(".hold-after-effect")
        if out.called and flag.exists():
            flag.unlink()
            _Path(".after-effect").write_text(str(__import__("os").getpid()))
            _time.sleep(120)
        return out

    ctx.effects.ensure = ensure
    return _real_reconcile(ctx, resource)


controller = define_controller(
    name="filesync", initial_status=lambda spec: {"writes": 0}, reconcile=reconcile, timeout=60)
'''


def test_kill9_inside_apply_and_between_effect_and_status(project: Project) -> None:
    _install(project, HOLDS)
    host = project.start_host()
    (project.root / ".hold-apply").write_text("")
    _apply(project, "a", {"path": "out/a.txt", "text": "A"})
    pid = int(wait_for(lambda: _read(project.root / ".in-apply"), 60, what="a in apply",
                       diag=_diag(project)))
    os.kill(pid, signal.SIGKILL)  # the controller worker, inside apply, record pending
    got = wait_for(lambda: _ready_at(project, "a", 1), 90, what="a Ready after the kill",
                   diag=_diag(project))
    assert (project.root / "out" / "a.txt").read_text() == "A"
    assert [e["state"] for e in got["effects"]] == ["applied"]

    (project.root / ".hold-after-effect").write_text("")
    _apply(project, "b", {"path": "out/b.txt", "text": "B"})
    wait_for(lambda: _read(project.root / ".after-effect"), 60, what="b after its effect",
             diag=_diag(project))
    os.killpg(host.pid, signal.SIGKILL)  # the host, effect applied, status not written
    host.wait()
    pid = int(_read(project.root / ".after-effect") or 0)
    if pid and psutil.pid_exists(pid):  # it dies with its host; make sure
        os.kill(pid, signal.SIGKILL)
    project.start_host()
    got = wait_for(lambda: _ready_at(project, "b", 1), 90, what="b Ready after the host kill",
                   diag=_diag(project))
    effects = got["effects"]
    assert [(e["effectKey"], e["state"]) for e in effects] == [("write-1-0", "applied")]
    started = [e for e in got["events"] if e["type"] == "effect_reserved"]
    assert len(started) == 1  # the applied write was never reserved (or run) again
    assert _ready_at(project, "a", 1) is not None
    writes = (project.root / "writes.log").read_text().splitlines()
    assert writes.count("out/a.txt") == 1 and writes.count("out/b.txt") == 1, writes


def _read(path: Path) -> str | None:
    try:
        return path.read_text() or None
    except FileNotFoundError:
        return None


HOLDING_REPORT = '''
import os, time
from pathlib import Path
from pi_workflows import compute, define_workflow


def report(ctx):
    flag = ctx.project_dir / ".hold-report"
    if flag.exists():
        flag.unlink()
        (ctx.project_dir / ".in-report").write_text(str(os.getpid()))
        time.sleep(120)
    return {"ok": True}


workflow = define_workflow(start_at="report", nodes=[compute("report", report)])
'''


def test_a_child_run_whose_worker_dies_gets_a_new_attempt(project: Project) -> None:
    _install(project)
    (project.root / ".pi" / "workflows" / "filesync-report.workflow.py").write_text(
        HOLDING_REPORT)
    (project.root / ".hold-report").write_text("")
    project.start_host()
    _apply(project, "c", {"path": "out/c.txt", "text": "C"})
    pid = int(wait_for(lambda: _read(project.root / ".in-report"), 60, what="c's report runs",
                       diag=_diag(project)))
    os.kill(pid, signal.SIGKILL)  # the child run's worker
    got = wait_for(lambda: _ready_at(project, "c", 1), 90, what="c Ready after a new attempt",
                   diag=_diag(project))
    attempts = [(c["attempt"], c["state"], c["runState"]) for c in got["children"]]
    assert attempts == [(1, "interrupted", "failed"), (2, "queued", "done")], attempts
    assert len({c["runId"] for c in got["children"]}) == 2
