"""`pi-workflows drill` through the real CLI: a short seeded drill finds no violation,
injects faults of several kinds, and reports in the documented shape; a drill forced to
kill the Pi of in-session runs mid-step finds no step accepted twice and no deferred turn
sent twice; a drill forced to kill controller workers repeats no reconcile effect, loses
no status and settles every resource; a directory that holds someone else's files is
refused."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .harness import clean_env
from .pi_env import pi_binary

pytestmark = pytest.mark.slow  # real processes: an e2e drill

FAULT_KINDS = {"host_kill9", "host_drain", "worker_kill9", "pi_kill9", "session_kill9",
               "worker_stop", "store_lock", "zygote_kill9", "spare_kill9", "clock_step",
               "runs_disk_full", "pi_session_kill9", "controller_worker_kill9"}


def drill(tmp_path: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pi_workflows", "drill", *args],
                          env=clean_env(tmp_path / "home"), capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path)


@pytest.mark.timeout(600)
def test_a_short_seeded_drill_injects_faults_and_finds_no_violation(tmp_path: Path) -> None:
    pi_binary()  # agent steps are part of the drill here: the pinned Pi must be installed
    report = tmp_path / "report.json"
    proc = drill(tmp_path, "--iterations", "15", "--seed", "7", "--project",
                 str(tmp_path / "scratch"), "--report", str(report), timeout=580)
    data = json.loads(report.read_text()) if report.exists() else {}
    assert proc.returncode == 0, (proc.stdout, proc.stderr[-3000:],
                                  data.get("violations"))
    assert stat.S_IMODE(report.stat().st_mode) == 0o600
    assert data["schema"] == "pi-workflows.drill.v1"
    assert (data["seed"], data["iterations"], data["ok"], data["settled"]) == (7, 15, True, True)
    assert data["agentSteps"] is True and data["skipped"] == []
    assert data["violations"] == [] and set(data["counts"]["violations"].values()) == {0}
    for fault in data["faults"]:
        assert {"iteration", "kind", "at", "target", "applied"} <= set(fault), fault
        assert fault["kind"] in FAULT_KINDS
    applied = {f["kind"] for f in data["faults"] if f["applied"]}
    assert len(applied) >= 3, data["faults"]
    assert applied & {"host_kill9", "host_drain"} and applied & {"worker_kill9", "worker_stop"}
    counts = data["counts"]
    assert counts["runs"] >= 15 and set(counts["queueStates"]) <= {"done", "failed", "cancelled"}
    launched = {k.split(":")[0] for k in counts["launches"]}
    assert {"detached", "session", "deferred"} <= launched, counts["launches"]
    assert any(k == "detached:think" for k in counts["launches"])  # agent steps ran
    assert proc.stdout.splitlines()[0].startswith("drill seed 7: 15 iteration(s)")
    assert "no violations" in proc.stdout


@pytest.mark.timeout(60)
def test_a_directory_with_other_files_is_refused_and_left_alone(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me\n")
    report = tmp_path / "report.json"
    proc = drill(tmp_path, "--iterations", "1", "--project", str(mine), "--report",
                 str(report), timeout=50)
    assert proc.returncode == 2
    assert proc.stderr.startswith("pi-workflows: error: --project") and \
        "holds files the drill did not create (notes.txt)" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"] and not report.exists()
    inside = drill(tmp_path, "--iterations", "1", "--project", str(tmp_path / "new"),
                   "--report", str(tmp_path / "new" / "r.json"), timeout=50)
    assert inside.returncode == 2 and "must be outside" in inside.stderr
    assert not (tmp_path / "new").exists()


@pytest.mark.timeout(300)
def test_a_drill_forced_to_fill_the_runs_disk_finds_no_violation(tmp_path: Path) -> None:
    """``--faults runs_disk_full``: the runs directory's tmpfs is filled again and again;
    every run still ends well, no host exits, and no tmpfs is left mounted."""
    report = tmp_path / "report.json"
    scratch = tmp_path / "scratch"
    proc = drill(tmp_path, "--iterations", "4", "--seed", "11", "--faults", "runs_disk_full",
                 "--project", str(scratch), "--report", str(report), timeout=280)
    data = json.loads(report.read_text()) if report.exists() else {}
    assert proc.returncode == 0, (proc.stdout, proc.stderr[-3000:], data.get("violations"))
    assert data["violations"] == [] and data["settled"] is True
    assert {f["kind"] for f in data["faults"]} == {"runs_disk_full"}
    assert not os.path.ismount(scratch / ".runsdisk")
    skipped = [s for s in data["skipped"] if s.startswith("runs_disk_full:")]
    if skipped:  # this machine may not mount a tmpfs: said, never a crash
        assert "drill: skipped runs_disk_full: cannot mount" in proc.stderr
        assert not any(f["applied"] for f in data["faults"])
        pytest.skip(skipped[0])
    assert all(f["applied"] for f in data["faults"]), data["faults"]
    counts = data["counts"]
    assert counts["violations"]["disk_full_mishandled"] == 0
    assert counts["violations"]["host_exited"] == 0 and counts["hostsStarted"] == 1
    assert set(counts["queueStates"]) <= {"done", "cancelled"}, counts


@pytest.mark.timeout(60)
def test_an_unknown_fault_kind_is_refused(tmp_path: Path) -> None:
    proc = drill(tmp_path, "--iterations", "1", "--faults", "disk_gremlin", "--project",
                 str(tmp_path / "s"), "--report", str(tmp_path / "r.json"), timeout=50)
    assert proc.returncode == 2 and "unknown kind(s) disk_gremlin" in proc.stderr
    assert not (tmp_path / "s").exists()


@pytest.mark.timeout(400)
def test_a_drill_forced_to_kill_in_session_pis_mid_step_finds_no_violation(
        tmp_path: Path) -> None:
    """``--faults pi_session_kill9``: each iteration a real Pi with the extension starts
    ``think``, whose agent step happens in its own conversation, and is killed -9 at a
    drawn moment of it; the run completes once (by the host, or the reopened session),
    no step's result is accepted twice and no deferred turn is delivered twice."""
    pi_binary()
    report = tmp_path / "report.json"
    scratch = tmp_path / "scratch"
    proc = drill(tmp_path, "--iterations", "4", "--seed", "5", "--faults", "pi_session_kill9",
                 "--project", str(scratch), "--report", str(report), timeout=380)
    data = json.loads(report.read_text()) if report.exists() else {}
    assert proc.returncode == 0, (proc.stdout, proc.stderr[-3000:], data.get("violations"))
    assert data["violations"] == [] and data["settled"] is True and data["skipped"] == []
    counts = data["counts"]
    in_session = {k: n for k, n in counts["launches"].items() if k.startswith("insession:")}
    assert sum(in_session.values()) == 4, counts["launches"]  # forced: one per iteration
    assert {f["kind"] for f in data["faults"]} == {"pi_session_kill9"}
    applied = [f for f in data["faults"] if f["applied"]]
    assert len(applied) >= 3 and all(f["target"].startswith("pi session ") for f in applied)
    assert counts["violations"]["step_accepted_twice"] == 0
    assert counts["violations"]["turn_sent_twice"] == 0
    # Nothing failed but the doomed launches: a killed Pi session fails no run. A run
    # ends cancelled only where a session's own model was drawn to cancel it.
    assert set(counts["errorCodes"]) <= {"source_changed", "cancelled"}, counts
    assert counts["errorCodes"].get("cancelled", 0) <= in_session.get(
        "insession:think:cancel", 0), counts
    # The Pi sessions are there to read: at least one step reached its conversation.
    sessions = list((scratch / ".drill" / "pi-sessions").rglob("*.jsonl"))
    assert sessions and any('"kind":"step"' in p.read_text() for p in sessions)


@pytest.mark.timeout(400)
def test_a_drill_forced_to_kill_controller_workers_finds_no_violation(tmp_path: Path) -> None:
    """``--faults controller_worker_kill9``: resources of the drill's controller are
    applied, changed, deleted and nudged while a controller worker (a reconciling one
    when there is one) is killed -9 each iteration; no applied effect's ledger line
    is there twice, no status is lost and every resource ends observed and Ready."""
    report = tmp_path / "report.json"
    scratch = tmp_path / "scratch"
    proc = drill(tmp_path, "--iterations", "5", "--seed", "24", "--faults",
                 "controller_worker_kill9", "--project", str(scratch), "--report", str(report),
                 timeout=380)
    data = json.loads(report.read_text()) if report.exists() else {}
    assert proc.returncode == 0, (proc.stdout, proc.stderr[-3000:], data.get("violations"))
    assert data["violations"] == [] and data["settled"] is True
    assert {f["kind"] for f in data["faults"]} == {"controller_worker_kill9"}
    applied = [f for f in data["faults"] if f["applied"]]
    assert len(applied) >= 3 and all(f["target"].startswith("controller worker ")
                                     for f in applied), data["faults"]
    assert any("ledger/" in f.get("note", "") for f in applied), applied  # mid-reconcile
    counts = data["counts"]
    assert counts["launches"].get("controller:apply", 0) >= 2, counts["launches"]
    assert counts["resources"] >= 1 and counts["resourcesReady"] == counts["resources"]
    for kind in ("effect_repeated", "status_lost", "resource_stuck"):
        assert counts["violations"][kind] == 0
    lines = (scratch / "ctl-ledger.txt").read_text().splitlines()
    assert lines and len(lines) == len(set(lines))  # every effect applied once
    assert "resource(s)" in proc.stdout.splitlines()[0]
