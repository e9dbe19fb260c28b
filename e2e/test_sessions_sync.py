"""`sync`: a session that comes back catches up on what changed, each thing exactly once."""

from __future__ import annotations

import fcntl
import json
import re
import signal
import sqlite3
import struct
import subprocess
import termios
from pathlib import Path

import pytest
from pi_workflows.protocol.clock import now_ms

from .harness import LineReader, Project, wait_for
from .sessions_kit import (
    FLOW,
    QUICK,
    Children,
    Terminal,
    cli_argv,
    query,
    run_id,
    sync_json,
    sync_lines,
)

pytestmark = pytest.mark.slow  # real processes: an e2e drill

NOTHING = "session {}: nothing new since the last sync"

NOTE = """
from pi_workflows import define_workflow, compute, notify, edge

workflow = define_workflow(
    start_at="tell",
    nodes=[notify("tell", lambda ctx: "hello " + ctx.input.get("task", "?")),
           compute("end", lambda ctx: {"ok": True})],
    edges=[edge("tell", "end")],
)
"""

REVIEW = """
from pi_workflows import define_workflow, compute, checkpoint, notify, edge

workflow = define_workflow(
    start_at="draft",
    nodes=[compute("draft", lambda ctx: {"text": "v1"}),
           checkpoint("approve", summary="approve v1?"),
           notify("tell", lambda ctx: "published with " + str(ctx.outputs["approve"]))],
    edges=[edge("draft", "approve"), edge("approve", "tell")],
)
"""

# Two notifications of 40,000 characters: more than a pipe holds.
LOUD = """
from pi_workflows import define_workflow, notify, edge

workflow = define_workflow(
    start_at="first",
    nodes=[notify("first", "A" * 40000), notify("second", "B" * 40000)],
    edges=[edge("first", "second")],
)
"""


def _pending_from(project: Project, session: str) -> list[tuple[int, int | None]]:
    return [(r["seq"], r["pending_from"]) for r in query(
        project, "SELECT seq, pending_from FROM session_watermarks WHERE session_id = ?",
        (session,))]


@pytest.mark.timeout(120)
def test_seed_000_a_terminal_run_parked_by_ctrl_c_is_finished_by_a_host_and_synced_once(
        project: Project) -> None:
    project.write_workflow("flow", FLOW)
    term = Terminal(project, "run", "flow", "hold", "--session", "s1")
    try:
        head = term.wait_line("Ctrl-C parks it")
        found = re.search(r"run (\S+) \(flow\)", head)
        assert found, head
        run = found.group(1)
        wait_for(lambda: project.lines("hold.started"), what="the node running")
        term.type(b"\x03")  # Ctrl-C typed at the terminal
        assert "parked" in term.wait_line("parked:")
        assert term.proc.wait(30) == 4, term.text()
    finally:
        term.close()
    assert project.row(run).state == "parked"
    assert sync_lines(project, "s1") == [
        f"{run}  flow  parked at hold; no host is running: start `pi-workflows host"
        " --background` to resume it"]
    project.release()
    project.start_host()
    wait_for(lambda: project.row(run).state == "done", what="the host finished the run",
             diag=lambda: project.diagnose([run]))
    assert sync_lines(project, "s1") == [f'{run}  flow  completed: {{"ok": true}}']
    assert sync_lines(project, "s1") == [NOTHING.format("s1")]
    assert len(project.lines("hold.started")) == 2


@pytest.mark.timeout(150)
def test_two_sessions_each_get_complete_catch_up_and_only_their_own_messages(
        project: Project) -> None:
    project.write_workflow("note", NOTE)

    def run(task: str, *args: str) -> str:
        out = json.loads(project.cli("run", "note", task, *args, "--json").stdout)
        assert out["runStatus"] == "completed", out
        return str(out["runId"])

    a1 = run("a1", "--session", "A")
    b_first = sync_json(project, "B")  # A's finished run is neither B's nor parked/waiting
    assert (b_first["firstSync"], b_first["runs"], b_first["notifications"]) == (True, [], [])
    a_first = sync_json(project, "A")
    assert [(r["runId"], r["change"]) for r in a_first["runs"]] == [(a1, "completed")]
    assert [n["message"] for n in a_first["notifications"]] == ["hello a1"]
    # Runs finish while both sessions are away: one by the host, one each.
    project.start_host()
    x = project.detach("note", {"task": "x"})
    wait_for(lambda: project.row(x).state == "done", what="the detached run done")
    b1 = run("b1", "--session", "B")
    a2 = run("a2", "--session", "A")
    expected = sorted([x, b1, a2])
    for session, message in (("A", "hello a2"), ("B", "hello b1")):
        snap = sync_json(project, session)
        assert snap["firstSync"] is False
        assert sorted(r["runId"] for r in snap["runs"]) == expected, (session, snap)
        assert {r["change"] for r in snap["runs"]} == {"completed"}
        assert [n["message"] for n in snap["notifications"]] == [message], (session, snap)
    for session in ("A", "B"):
        assert sync_lines(project, session) == [NOTHING.format(session)]


@pytest.mark.timeout(120)
def test_sync_shows_a_running_run_at_its_node_and_a_parked_one_a_host_will_resume(
        project: Project, children: Children) -> None:
    project.write_workflow("flow", FLOW)
    assert sync_lines(project, "s9") == [NOTHING.format("s9")]
    project.start_host("--concurrency", "1")
    hosted = project.detach("flow", {"task": "hold"})
    wait_for(lambda: len(project.lines("hold.started")) == 1, what="the host's run holding")
    proc = children.start("run", "run", "flow", "hold", "--session", "s2")
    wait_for(lambda: len(project.lines("hold.started")) == 2, what="the terminal's run holding")
    parked = json.loads(project.cli("status", "--session", "s2", "--json").stdout)["run"]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 4  # parked; the host's one slot is taken
    assert sync_lines(project, "s9") == [
        f"{hosted}  flow  running at hold",
        f"{parked['runId']}  flow  parked at hold; a running host resumes it"]
    project.release()
    wait_for(lambda: project.row(parked["runId"]).state == "done", what="both runs done",
             diag=lambda: project.diagnose([hosted, parked["runId"]]))
    done = 'flow  completed: {"ok": true}'
    assert sync_lines(project, "s9") == [f"{hosted}  {done}", f"{parked['runId']}  {done}"]


@pytest.mark.timeout(90)
def test_sync_follow_shows_a_host_run_finishing_and_exits_0_on_ctrl_c(
        project: Project, children: Children) -> None:
    project.write_workflow("quick", QUICK)
    proc, out = children.piped("sync", "--follow", "--session", "s1")
    assert out.next(30, "the first snapshot") == NOTHING.format("s1") + "\n"
    project.start_host()
    run = project.detach("quick")
    line = ""
    while "completed" not in line:
        line = out.next(30, f"run {run} completed")
        assert line.startswith(f"{run}  quick  "), line
    seen_at = now_ms()
    assert line == f'{run}  quick  completed: {{"inputBytes": 2, "ok": true}}\n'
    finished = project.row(run).finished_at
    assert finished is not None and seen_at - finished < 5000
    wait_for(lambda: _pending_from(project, "s1")[0][1] is None,
             what="the follower to confirm what it printed")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 0
    assert sync_lines(project, "s1") == [NOTHING.format("s1")]


@pytest.mark.timeout(120)
def test_a_sync_killed_while_printing_loses_nothing(project: Project,
                                                    children: Children) -> None:
    project.env["PI_WORKFLOWS_LEASE_MS"] = "1500"  # the notifications' delivery lease
    project.write_workflow("loud", LOUD)
    assert sync_lines(project, "s1") == [NOTHING.format("s1")]
    (before, _), = _pending_from(project, "s1")
    out = json.loads(project.cli("run", "loud", "--session", "s1", "--json").stdout)
    run = out["runId"]
    # A sync whose output nobody reads: it blocks writing, after the watermark moved.
    proc = subprocess.Popen(cli_argv(project, "sync", "--session", "s1"), env=project.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    children.procs.append(proc)
    assert proc.stdout is not None
    fd = proc.stdout.fileno()

    def held() -> int:
        return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0])

    def blocked() -> bool:  # in the kernel's pipe write, the first message written
        wchan = Path(f"/proc/{proc.pid}/wchan")
        return proc.poll() is None and "pipe_write" in wchan.read_text() and held() > 40000

    wait_for(blocked, what="the sync blocked on a full pipe",
             diag=lambda: f"exit {proc.poll()}, {held()} bytes in the pipe")
    (seq, pending), = _pending_from(project, "s1")
    assert pending == before and seq > before  # the watermark moved before the output
    proc.kill()  # kill -9 between showing the snapshot and confirming it
    proc.wait(10)
    printed = proc.stdout.read().decode()
    assert printed.startswith(f"{run}  loud  completed: ") and f"[progress] loud ({run}): A" \
        in printed
    sql = "SELECT count(*) FROM workflow_notifications WHERE delivery_expires_at > ?"
    wait_for(lambda: query(project, sql, (now_ms(),))[0][0] == 0,
             what="the dead sync's delivery lease to lapse")
    snap = sync_json(project, "s1")  # subsumes the lost snapshot
    assert snap["since"] == before and snap["watermark"] == seq
    assert [(r["runId"], r["change"], r["finalOutputTruncated"]) for r in snap["runs"]] == [
        (run, "completed", True)]
    assert [(n["nodeId"], n["message"]) for n in snap["notifications"]] == [
        ("first", "A" * 40000), ("second", "B" * 40000)]
    assert sync_lines(project, "s1") == [NOTHING.format("s1")]


@pytest.mark.timeout(120)
def test_a_waiting_run_is_in_every_first_sync_and_answer_session_gets_its_messages(
        project: Project) -> None:
    project.write_workflow("review", REVIEW)
    project.start_host()
    parent = project.detach("review")
    wait_for(lambda: project.state(parent).get("status") == "waiting", what="the checkpoint")
    waiting = (f"{parent}  review  waiting at approve: approve v1?; answer with"
               f" `pi-workflows answer {parent} TEXT... --session s1`")
    assert sync_lines(project, "s1") == [waiting]
    first = sync_json(project, "s2")
    assert [(r["runId"], r["change"], r["answerCommand"]) for r in first["runs"]] == [
        (parent, "waiting", f"pi-workflows answer {parent} TEXT... --session s2")]
    child = json.loads(project.cli("answer", parent, "ship", "it", "--session", "s1",
                                   "--json").stdout)["runId"]
    wait_for(lambda: project.row(child).state == "done", what="the continuation done",
             diag=lambda: project.diagnose([parent, child]))
    mine = sync_json(project, "s1")
    assert child in [r["runId"] for r in mine["runs"]]
    assert [(n["runId"], n["message"]) for n in mine["notifications"]] == [
        (child, "published with ship it")]
    other = sync_json(project, "s2")
    assert child in [r["runId"] for r in other["runs"]] and other["notifications"] == []
    # Answered, the parent no longer waits: a newcomer's first sync has nothing.
    assert sync_lines(project, "s3") == [NOTHING.format("s3")]


@pytest.mark.timeout(120)
def test_a_follow_up_printed_before_a_crash_is_not_delivered_again(
        project: Project, children: Children) -> None:
    project.env.update(PI_WORKFLOWS_LEASE_MS="1500", PI_WORKFLOWS_BUSY_TIMEOUT_MS="60000")
    project.write_workflow("loud", LOUD)
    path = project.write_workflow("quick", QUICK)
    assert project.cli("run", "loud", "--session", "s1").returncode == 0
    failed = run_id(project.cli("start", "quick", "--session", "s1", "--json"))
    path.write_text(path.read_text() + "\n# changed\n")
    assert project.cli("activate", "--session", "s1", check=False).returncode == 1
    proc = subprocess.Popen(cli_argv(project, "sync", "--session", "s1"), env=project.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    children.procs.append(proc)
    assert proc.stdout is not None
    wait_for(lambda: "pipe_write" in Path(f"/proc/{proc.pid}/wchan").read_text(),
             what="the sync blocked writing its notifications")
    # The store is locked while it prints: it shows everything, then waits to resolve.
    lock = sqlite3.connect(project.paths.store_file, timeout=10, isolation_level=None)
    try:
        lock.execute("BEGIN IMMEDIATE")
        out, line = LineReader(proc.stdout), ""
        while not line.startswith("follow-up:"):
            line = out.next(30, "the follow-up line")
        assert failed in line and proc.poll() is None
        proc.kill()  # after the follow-up was printed, before its intent was resolved
        proc.wait(10)
    finally:
        lock.close()
    sql = "SELECT count(*) FROM workflow_turn_intents WHERE claim_expires_at > ?"
    wait_for(lambda: query(project, sql, (now_ms(),))[0][0] == 0,
             what="the dead sync's claim on the intent to lapse")
    assert sync_json(project, "s1")["followUps"] == []
