"""`pi-workflows gc` against real runs: a live host, every state, dry runs, kill -9 mid-way."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pi_workflows.protocol.clock import now_ms

from tests.helpers.processes import reap

from .harness import LineReader, Project, wait_for
from .sessions_kit import Children

pytestmark = pytest.mark.slow  # real processes: an e2e drill

DAY = 86_400_000
# input {"mode": ...}: done -> completed, fail -> failed, gate -> waits for the file named by
# "gate", ask -> waits at a checkpoint; an answer "hold:NAME" makes the continuation wait too.
MAINT = """
import pathlib, time
from pi_workflows import define_workflow, compute, checkpoint, edge, switch

def wait_for_file(ctx, name):
    with open(ctx.project_dir / (name + ".started"), "a") as fh:
        fh.write(ctx.run_id + "\\n")
    while not (ctx.project_dir / name).exists():
        if ctx.cancelled():
            raise RuntimeError("stopped")
        time.sleep(0.02)

def gate(ctx):
    wait_for_file(ctx, ctx.input["gate"])
    return {"gate": ctx.input["gate"]}

def after(ctx):
    answer = ctx.outputs["ask"]
    if answer.startswith("hold:"):
        wait_for_file(ctx, answer[5:])
    return {"answer": answer}

def boom(ctx):
    raise RuntimeError("no luck today")

workflow = define_workflow(
    start_at="pick",
    nodes=[compute("pick", lambda ctx: {"mode": ctx.input.get("mode", "done")}),
           compute("gate", gate), checkpoint("ask", summary="go on?"), compute("after", after),
           compute("boom", boom), compute("end", lambda ctx: {"ok": True})],
    edges=[switch("pick", "$.mode", {"done": "end", "gate": "gate", "ask": "ask",
                                     "fail": "boom"}),
           edge("gate", "end"), edge("ask", "after")],
)
"""
TELL = """
from pi_workflows import define_workflow, notify
workflow = define_workflow(start_at="tell", nodes=[notify("tell", "all done")])
"""


def _dump(project: Project) -> dict[str, list[tuple[Any, ...]]]:
    """Every row the store holds for runs (leases renew and runners beat: left out)."""
    db = sqlite3.connect(f"file:{project.paths.store_file}?mode=ro", uri=True, timeout=10)
    try:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                          " AND name NOT LIKE 'sqlite_%' AND name != 'runners'")]
        out = {n: sorted(db.execute(f"SELECT * FROM {n}").fetchall(), key=repr) for n in names}
        out["workflow_run_queue"] = sorted(db.execute(
            "SELECT run_id, state, claim_token, updated_at, finished_at, parent_run_id"
            " FROM workflow_run_queue").fetchall())
        return out
    finally:
        db.close()


def _tree(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.lstat().st_size if p.is_file() else -1)
                  for p in root.rglob("*"))


def _gc(project: Project, *args: str, now: int | None = None) -> dict[str, Any]:
    extra = ["--now-ms", str(now)] if now is not None else []
    out: dict[str, Any] = json.loads(project.cli("gc", *args, *extra, "--json").stdout)
    return out


def _listed(project: Project) -> set[str]:
    return {r["runId"] for r in json.loads(project.cli("list", "--json").stdout)["runs"]}


def _detach(project: Project, payload: dict[str, Any], *args: str) -> str:
    return str(json.loads(project.cli("run", "maint", "--detach", "--json", "--input-json",
                                      json.dumps(payload), *args).stdout)["runId"])


def _state(project: Project, run: str) -> tuple[str, str | None]:
    row = project.row(run)
    return row.state, project.state(run).get("status")


@pytest.mark.timeout(240)
def test_gc_with_a_live_host_removes_exactly_the_old_settled_chains(
        project: Project, children: Children) -> None:
    project.write_workflow("maint", MAINT)
    project.write_workflow("tell", TELL)
    # Before any host: s7's run parked (closed terminal), then s7 reserves another run, so a
    # host leaves the parked one alone (it would give s7 two) and never starts the queued one.
    term = children.start("parked", "run", "maint", "--input-json", '{"mode": "gate",'
                          ' "gate": "g-park"}', "--session", "s7")
    wait_for(lambda: project.lines("g-park.started"), what="the session's node running")
    parked = project.lines("g-park.started")[0]
    term.send_signal(signal.SIGTERM)
    assert term.wait(30) == 4
    queued = json.loads(project.cli("start", "maint", "--input-json", '{"mode": "done"}',
                                    "--session", "s7", "--json").stdout)["runId"]
    project.cli("sync", "--session", "s9")  # a session that has caught up before gc
    project.start_host("--concurrency", "4")
    done = _detach(project, {"mode": "done"})
    failed = _detach(project, {"mode": "fail"})
    cancelled = _detach(project, {"mode": "gate", "gate": "g-cancel"})
    waiting = _detach(project, {"mode": "ask"})
    answered = _detach(project, {"mode": "ask"})
    opened = _detach(project, {"mode": "ask"})
    told = json.loads(project.cli("run", "tell", "--detach", "--session", "s2",
                                  "--json").stdout)["runId"]
    running = _detach(project, {"mode": "gate", "gate": "g-run"})
    wait_for(lambda: project.lines("g-cancel.started") and project.lines("g-run.started"),
             what="the gated runs running")
    project.cli("cancel", cancelled)
    settled = [done, failed, cancelled, waiting, answered, opened, told]
    wait_for(lambda: all(project.row(r).state in ("done", "failed", "cancelled")
                         for r in settled), what="the old runs settled",
             diag=lambda: project.diagnose(settled))
    answered_c = json.loads(project.cli("answer", answered, "fine", "--json").stdout)["runId"]
    opened_c = json.loads(project.cli("answer", opened, "hold:g-open", "--json").stdout)["runId"]
    wait_for(lambda: project.row(answered_c).state == "done"
             and project.lines("g-open.started"), what="the continuations")
    with project.store() as store:
        old = [store.get(r) for r in [*settled, answered_c]]
    split = max(r.finished_at or r.updated_at for r in old if r is not None) + 1
    wait_for(lambda: now_ms() > split, what="the clock to pass the split", interval=0.001)
    young = _detach(project, {"mode": "done"})
    wait_for(lambda: project.row(young).state == "done", what="the young run")
    at = split + 30 * DAY  # --older-than 30d then cuts at `split`

    gone = {done, failed, cancelled, answered, answered_c}
    rows, files = _dump(project), _tree(project.paths.runs_dir)
    preview = _gc(project, "--older-than", "30d", "--dry-run", now=at)
    assert preview["dryRun"] is True and {r["runId"] for r in preview["removed"]} == gone
    assert _dump(project) == rows and _tree(project.paths.runs_dir) == files
    assert {k["runId"]: k["reason"] for k in preview["kept"]} == {
        waiting: "waiting", opened: "open", told: "undelivered"}

    human = project.cli("gc", "--older-than", "30d", "--now-ms", str(at))
    # gc also sweeps the temp dirs of dead workers, wherever they came from (other
    # tests' too): that line may or may not be there.
    lines = [line for line in human.stdout.splitlines() if "temporary director" not in line]
    assert sorted(line.split()[1] for line in lines[:-1]) == sorted(gone)
    assert f"removed {done}  maint  completed  settled 30 d 0 h ago" in lines
    assert any(line.startswith(f"removed {failed}  maint  failed") for line in lines)
    assert lines[-1].startswith("removed 5 run(s) in 4 chain(s)") and "kept 3" in lines[-1]
    listed = _listed(project)
    assert not listed & gone
    assert listed >= {waiting, opened, opened_c, told, running, parked, queued, young}
    assert all(not (project.paths.runs_dir / r).exists() for r in gone)
    assert all((project.paths.runs_dir / r).is_dir()
               for r in (waiting, opened, opened_c, told, running, parked, young))
    again = project.cli("status", done, check=False)
    assert again.returncode == 2 and "no run" in again.stderr
    assert _gc(project, "--older-than", "30d", now=at)["removed"] == []

    # The session that had caught up sees what changed since, and nothing removed.
    seen = json.loads(project.cli("sync", "--session", "s9", "--json").stdout)
    assert not {r["runId"] for r in seen["runs"]} & gone and young in {
        r["runId"] for r in seen["runs"]}
    # What stayed still works: answer, release, activate; the host goes on.
    final = json.loads(project.cli("answer", waiting, "yes", "--json").stdout)["runId"]
    project.release("g-run")
    project.release("g-open")
    wait_for(lambda: project.row(final).state == "done" and project.row(running).state == "done"
             and project.row(opened_c).state == "done", what="the kept runs finishing",
             diag=lambda: project.diagnose([final, running, opened_c]))
    assert project.state(final)["finalOutput"] == {"answer": "yes"}
    assert project.cli("activate", "--session", "s7", timeout=90).returncode == 0
    project.release("g-park")
    wait_for(lambda: _state(project, parked) == ("done", "completed"),
             what="the parked run resumed by the host", diag=lambda: project.diagnose([parked]))
    # Once s2 has its message, the notified run may go too.
    assert "all done" in project.cli("sync", "--session", "s2").stdout
    later = _gc(project, "--older-than", "30d", now=at)
    assert [r["runId"] for r in later["removed"]] == [told]
    assert project.hosts[0].poll() is None


def _quick_runs(project: Project, count: int) -> list[str]:
    project.write_workflow("maint", MAINT)
    ids = []
    for _ in range(count):
        proc = project.cli("run", "maint", "--input-json", '{"mode": "done"}', "--json")
        ids.append(json.loads(proc.stdout)["runId"])
    return ids


@pytest.mark.timeout(120)
@pytest.mark.parametrize("point", ["deleted", "trashed"])
def test_gc_killed_mid_way_is_finished_by_the_next_one(project: Project, point: str) -> None:
    runs = _quick_runs(project, 3)
    env = {**project.env, "PI_WORKFLOWS_GC_PAUSE": point}
    # A zero --older-than is refused; a clock a minute ahead makes the new runs old enough.
    later = str(int(time.time() * 1000) + 60_000)
    proc = subprocess.Popen([sys.executable, "-m", "pi_workflows", "gc", "--older-than", "1s",
                             "--now-ms", later, "--project", str(project.root)], env=env,
                            text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        assert f"paused at {point}" in LineReader(proc.stderr).next(60, "the pause")
    finally:
        reap(proc)
    first, rest = runs[0], runs[1:]
    bundle = project.paths.runs_dir / first
    # The first run's rows are gone; its bundle is whole (or wholly in the trash).
    assert bundle.is_dir() == (point == "deleted")
    if point == "deleted":
        assert json.loads((bundle / "state.json").read_text())["status"] == "completed"
    assert _listed(project) == set(rest)
    status = project.cli("status", first, check=False)
    # Half removed reads as gone: no queue row (its bundle waits in place or in the trash).
    assert status.returncode == 2
    assert "no run" in status.stderr or "has no queue row" in status.stderr
    assert project.cli("watch", first, check=False).returncode == 2
    assert all(project.cli("status", r).returncode == 0 for r in rest)
    report = _gc(project, "--older-than", "1s", now=int(later))
    assert report["finished"] == ([first] if point == "deleted" else [])
    assert sorted(r["runId"] for r in report["removed"]) == sorted(rest)
    assert _listed(project) == set()
    assert os.listdir(project.paths.runs_dir) == [".gc"]
    assert os.listdir(project.paths.runs_dir / ".gc" / "trash") == []


@pytest.mark.timeout(60)
def test_bad_durations_and_a_project_without_runs(project: Project) -> None:
    for bad in ("30", "1.5x", "abc"):
        proc = project.cli("gc", "--older-than", bad, check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert proc.stderr.strip().splitlines() == [
            f"pi-workflows: error: --older-than {bad!r} is not a duration: use a number and a"
            " unit (s, m, h, d, w), such as 30m, 2h or 7d"]
    assert not project.paths.state_dir.exists()  # nothing was created
    empty = _gc(project, "--older-than", "30d")
    assert empty["removed"] == [] and empty["summary"]["runs"] == 0
    assert not project.paths.store_file.exists()
    missing = project.cli("gc", check=False)
    assert missing.returncode == 2 and "--older-than" in missing.stderr
