"""Durable deferred launches (seed 002): `start` reserves, `activate` starts, once."""

from __future__ import annotations

import json
import re

import pytest
from pi_workflows.protocol.limits import MAX_ERROR_BYTES, MAX_PRIVATE_INPUT_BYTES

from .harness import Project, wait_for
from .sessions_kit import (
    FLOW,
    QUICK,
    SLOW_LOAD,
    Children,
    cli_with_stdin,
    follow_up,
    marked_processes,
    no_rows,
    one_line,
    run_id,
    store_events,
    sync_json,
    sync_lines,
)

pytestmark = pytest.mark.slow  # real processes: an e2e drill

STRICT = """
from pi_workflows import define_workflow, compute

def parse(raw):
    if not isinstance(raw, dict) or not isinstance(raw.get("n"), int):
        raise ValueError("give {\\"n\\": <integer>}")
    return raw

workflow = define_workflow(start_at="one", nodes=[compute("one", lambda ctx: ctx.input)],
                           input=parse)
"""


@pytest.mark.timeout(120)
def test_start_commits_a_queued_run_that_a_running_host_never_claims(project: Project) -> None:
    project.env["PI_WORKFLOWS_POLL_INTERVAL_S"] = "0.05"
    project.write_workflow("quick", QUICK)
    project.start_host()
    reply = json.loads(project.cli("start", "quick", "a", "task", "--session", "s1",
                                   "--json").stdout)
    run = reply["runId"]
    assert reply == {"action": "start", "workflow": "quick", "runId": run, "queued": True}
    # Durable when `start` returned: another process reads the reservation.
    row = project.row(run)
    assert (row.state, row.origin_session, row.runner_id, row.has_private_input) == (
        "queued", "s1", None, True)
    assert not (project.paths.runs_dir / run).exists()
    human = project.cli("start", "quick", "--session", "s2").stdout
    assert re.fullmatch(r"Workflow quick queued \(run [A-Za-z0-9._-]+\)\.\n", human), human
    # The host makes passes (0.05 s apart): runs detached after the reservation finish one
    # after another, although the older reservation comes first in the host's claim order.
    later = []
    for _ in range(3):
        later.append(project.detach("quick"))
        wait_for(lambda: project.row(later[-1]).state == "done", what="a detached run done",
                 diag=lambda: project.diagnose([run, *later]))
    row = project.row(run)
    assert (row.state, row.runner_id, row.claim_token) == ("queued", None, None)
    assert [kind for kind, _ in store_events(project, run)] == ["queued"]
    assert not (project.paths.runs_dir / run).exists() and marked_processes(run) == []
    assert project.lines("quick.ran") == later  # no node of the reserved run ran
    status = json.loads(project.cli("status", "--session", "s1", "--json").stdout)
    assert status["run"]["runId"] == run and status["run"]["queueState"] == "queued"


@pytest.mark.timeout(90)
def test_a_preflight_failure_exits_2_with_one_line_and_leaves_no_row(project: Project) -> None:
    project.write_workflow("quick", QUICK)
    project.write_workflow("strict", STRICT)
    cases = [
        (["start", "nosuch", "--session", "s1"], "no workflow named 'nosuch'"),
        (["start", "quick", "--session", "s1", "--input-json", "{bad"], "not valid JSON"),
        (["start", "strict", "--session", "s1", "--input-json", '{"n": "x"}'],
         "invalid input for 'strict'"),
        (["start", "quick", "--session", "../s1"], "invalid session id"),
        (["start", "quick"], "give --session ID or set PI_WORKFLOWS_SESSION"),
    ]
    for args, message in cases:
        proc = project.cli(*args, check=False)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert message in one_line(proc.stderr) and proc.stdout == "", args
        assert no_rows(project), args
    first = run_id(project.cli("start", "strict", "--session", "s1", "--input-json",
                               '{"n": 1}', "--json"))
    busy = project.cli("start", "quick", "--session", "s1", check=False)
    assert busy.returncode == 2 and busy.stdout == ""
    assert f"already has an active run ({first}, queued)" in one_line(busy.stderr)
    runs = json.loads(project.cli("list", "--json").stdout)["runs"]
    assert [r["runId"] for r in runs] == [first]  # the refused start left nothing


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("task", "code", "last"), [
    ("done", 0, 'completed: {"ok": true}'),
    ("ask", 3, "waiting at ask: go on?"),
    ("fail", 1, "failed [node_error] node 'boom': RuntimeError: no luck today"),
])
def test_activate_runs_the_reservation_and_exits_with_its_code(
        project: Project, task: str, code: int, last: str) -> None:
    project.write_workflow("flow", FLOW)
    run = run_id(project.cli("start", "flow", task, "--session", "s1", "--json"))
    proc = project.cli("activate", "--session", "s1", check=False)
    assert proc.returncode == code, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"run {run} (flow)") and lines[-1].endswith(last), lines
    assert project.row(run).state == ("failed" if code == 1 else "done")
    again = project.cli("activate", "--session", "s1")
    assert again.stdout == "nothing to activate for session s1\n"
    assert len([e for e in project.events(run) if e["type"] == "run_started"]) == 1


@pytest.mark.timeout(120)
def test_two_concurrent_activates_start_the_run_once(project: Project,
                                                     children: Children) -> None:
    project.write_workflow("flow", FLOW)
    run = run_id(project.cli("start", "flow", "hold", "--session", "s1", "--json"))
    procs = [children.start(f"activate{i}", "activate", "--session", "s1") for i in (1, 2)]

    def gave_up() -> int | None:
        ended = [i for i, proc in enumerate(procs, 1) if proc.poll() is not None]
        return ended[0] if ended else None

    loser = wait_for(gave_up, what="one activate to give up")
    wait_for(lambda: len(project.lines("hold.started")) == 1, what="the other one holding")
    assert procs[loser - 1].returncode == 0
    said = one_line(children.output(f"activate{loser}"))
    assert re.search(f"run {run} .*(elsewhere|another)", said), said
    project.release()
    winner = 3 - loser
    assert procs[winner - 1].wait(60) == 0
    out = children.output(f"activate{winner}")
    assert out.splitlines()[-1].endswith('completed: {"ok": true}'), out
    assert len(project.lines("hold.started")) == 1
    assert [e["type"] for e in project.events(run)].count("run_started") == 1
    workers = [p for p in project.state_processes(run) if p["role"] == "worker"]
    assert len(workers) == 1
    kinds = [kind for kind, _ in store_events(project, run)]
    assert kinds == ["queued", "starting", "running", "done"], kinds


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("change", "code", "reason"), [
    ("edit", "source_changed", "the workflow file {path} changed after the run was queued;"
                               " start the run again"),
    ("delete", "workflow_not_found", "the workflow file {path} of 'quick' no longer exists;"
                                     " restore it or start the workflow again"),
])
def test_a_launch_that_fails_after_start_gives_one_follow_up_and_a_new_start_works(
        project: Project, change: str, code: str, reason: str) -> None:
    path = project.write_workflow("quick", QUICK)
    assert sync_lines(project, "s1") == ["session s1: nothing new since the last sync"]
    failed = run_id(project.cli("start", "quick", "--session", "s1", "--json"))
    if change == "edit":
        path.write_text(path.read_text() + "\n# edited between start and activate\n")
    else:
        path.unlink()
    proc = project.cli("activate", "--session", "s1", check=False)
    assert proc.returncode == 1, proc.stderr
    row = project.row(failed)
    assert (row.state, row.error_code, row.has_private_input) == ("failed", code, False)
    message = reason.format(path=path)
    assert row.error_message == message
    status = json.loads(project.cli("status", "--session", "s1", "--json").stdout)
    assert (status["run"]["runId"], status["run"]["queueState"]) == (failed, "failed")
    assert not project.lines("quick.ran")  # no node ran
    first = sync_lines(project, "s1")
    assert first == [f"{failed}  quick  failed [{code}] {message}",
                     follow_up("quick", failed, message)]
    assert sync_lines(project, "s1") == ["session s1: nothing new since the last sync"]
    assert sync_json(project, "s1")["followUps"] == []
    # The reservation was released: a corrected start gets a new id and runs.
    if change == "delete":
        project.write_workflow("quick", QUICK)
    fixed = run_id(project.cli("start", "quick", "--session", "s1", "--json"))
    assert fixed != failed
    done = project.cli("activate", "--session", "s1")
    assert done.stdout.splitlines()[-1].endswith('completed: {"inputBytes": 2, "ok": true}')
    status = json.loads(project.cli("status", failed, "--json").stdout)
    assert (status["queueState"], status["errorCode"], status["error"]) == (
        "failed", code, message)
    assert project.row(fixed).state == "done" and project.lines("quick.ran") == [fixed]
    assert sync_json(project, "s1")["followUps"] == []  # the fixed run owes nothing


@pytest.mark.timeout(90)
def test_a_launch_error_is_stored_redacted_and_bounded(project: Project) -> None:
    path = project.write_workflow("quick", QUICK)
    run = run_id(project.cli("start", "quick", "--session", "s1", "--json"))
    with open(path, "a") as fh:  # the file now fails to import, loudly
        fh.write('raise ValueError("password=hunter2 bearer tok.en.42 " + "z" * 5000)\n')
    assert project.cli("activate", "--session", "s1", check=False).returncode == 1
    row = project.row(run)
    assert row.state == "failed" and row.error_code == "workflow_invalid"
    message = row.error_message or ""
    assert "import failed" in message and "password=[redacted] bearer [redacted]" in message
    assert len(message.encode()) <= MAX_ERROR_BYTES
    snap = sync_json(project, "s1")
    (intent,) = snap["followUps"]
    assert intent["message"] == follow_up("quick", run, message)[len("follow-up: "):]
    shown = json.dumps(snap) + project.cli("status", run).stdout
    files = list(project.paths.store_file.parent.glob(project.paths.store_file.name + "*"))
    assert project.paths.store_file in files  # with its -wal and -shm, if any
    stored = b"".join(f.read_bytes() for f in files)
    for secret in ("hunter2", "tok.en.42"):
        assert secret not in shown and secret.encode() not in stored


@pytest.mark.timeout(90)
def test_a_cancelled_launch_gives_no_follow_up_and_frees_the_session(project: Project) -> None:
    project.write_workflow("quick", QUICK)
    project.env["PI_WORKFLOWS_SESSION"] = "s1"  # instead of --session, for every command
    assert sync_json(project, "s1")["firstSync"] is True
    first = run_id(project.cli("start", "quick", "--json"))
    out = json.loads(project.cli("cancel", first, "--json").stdout)
    assert (out["state"], out["cancelRequested"]) == ("cancelled", False)
    assert project.cli("activate").stdout == "nothing to activate for session s1\n"
    snapshot = json.loads(project.cli("sync", "--json").stdout)
    assert [(r["runId"], r["change"]) for r in snapshot["runs"]] == [(first, "cancelled")]
    assert snapshot["followUps"] == [] and snapshot["session"] == "s1"
    assert not (project.paths.runs_dir / first).exists()
    second = run_id(project.cli("start", "quick", "--json"))
    assert second != first and project.cli("activate").returncode == 0
    assert project.lines("quick.ran") == [second]
    assert json.loads(project.cli("sync", "--json").stdout)["followUps"] == []


@pytest.mark.timeout(120)
def test_cancel_while_starting_wins_over_the_activation_fence(project: Project,
                                                              children: Children) -> None:
    project.write_workflow("slow", SLOW_LOAD)
    run = run_id(project.cli("start", "slow", "--session", "s1", "--json"))
    (project.root / "block-load").write_text("")  # the worker blocks loading the file
    proc = children.start("activate", "activate", "--session", "s1")
    wait_for(lambda: project.lines("load.started"), what="the worker loading the workflow")
    status = json.loads(project.cli("status", run, "--json").stdout)
    assert (status["queueState"], status["runStatus"]) == ("starting", None)
    out = json.loads(project.cli("cancel", run, "--json").stdout)
    assert out["state"] == "cancelled"
    (project.root / "release-load").write_text("")
    assert proc.wait(60) == 1, children.output("activate")
    assert not project.lines("one.ran")  # the executor was never released
    row = project.row(run)
    assert (row.state, row.claim_token, row.has_private_input) == ("cancelled", None, False)
    kinds = [kind for kind, _ in store_events(project, run)]
    assert "running" not in kinds and kinds[-1] == "cancelled", kinds
    assert sync_json(project, "s1")["followUps"] == []
    again = run_id(project.cli("start", "slow", "--session", "s1", "--json"))
    assert project.cli("activate", "--session", "s1").returncode == 0
    assert project.lines("one.ran") == [again]


@pytest.mark.timeout(120)
def test_input_file_takes_200_kib_and_refuses_just_over_1_mib(project: Project) -> None:
    project.write_workflow("quick", QUICK)
    over = project.root / "over.json"  # a JSON string one byte over the limit
    over.write_text('"' + "x" * (MAX_PRIVATE_INPUT_BYTES - 1) + '"')
    assert over.stat().st_size == MAX_PRIVATE_INPUT_BYTES + 1
    for args in (["start", "quick", "--session", "s1"], ["run", "quick", "--session", "s1"],
                 ["run", "quick", "--detach"]):
        proc = project.cli(*args, "--input-file", str(over), check=False)
        assert proc.returncode == 2, (args, proc.stderr)
        assert f"larger than {MAX_PRIVATE_INPUT_BYTES} bytes" in one_line(proc.stderr)
        assert no_rows(project), args
    payload = {"blob": "y" * (200 * 1024)}  # more than one argument may carry (128 KiB)
    (project.root / "in.json").write_text(json.dumps(payload))
    run = run_id(project.cli("start", "quick", "--session", "s1", "--input-file",
                             str(project.root / "in.json"), "--json"))
    done = project.cli("activate", "--session", "s1")
    size = len(json.dumps(payload))
    assert done.stdout.splitlines()[-1].endswith(f'{{"inputBytes": {size}, "ok": true}}')
    assert project.state(run)["input"] == payload
    piped = cli_with_stdin(project, json.dumps(payload).encode(), "run", "quick",
                           "--session", "s2", "--input-file", "-", "--json")
    assert piped.returncode == 0, piped.stderr
    out = json.loads(piped.stdout)
    assert out["runStatus"] == "completed" and out["finalOutput"]["inputBytes"] == size


@pytest.mark.timeout(60)
def test_status_of_a_cancelled_launch_has_no_none(project: Project) -> None:
    project.write_workflow("quick", QUICK)
    run = run_id(project.cli("start", "quick", "--session", "s1", "--json"))
    project.cli("cancel", run)
    line = project.cli("status", run).stdout.strip()
    assert line.startswith(f"{run}  quick  cancelled") and "None" not in line, line
