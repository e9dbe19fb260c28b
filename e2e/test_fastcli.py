"""The fast command line answers byte for byte as the typer app does.

Every case runs ``python -m pi_workflows ...`` twice, on the fast path and
with ``PI_WORKFLOWS_NO_FAST_CLI=1`` (the full typer app), and compares exit
code, stdout and stderr exactly: good answers, each one-line error (bad run
id, unknown project, no store, ambiguous prefix, bad session, bad filters),
settings errors from the environment and the config file, and the cases the
fast path leaves to typer; the Pi extension's session runner (``activate
--session S --park-on-eof``) completes, fails, waits and parks on its
lifeline alike. The plain cases are also checked to really take the fast
path (neither typer nor pydantic is loaded).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.processes import reap

from .harness import Project, wait_for
from .snippets import HOLD, ONE_NODE, REVIEW

pytestmark = pytest.mark.slow  # real processes: an e2e drill

FAST_PROBE = (
    "import sys\n"
    "from pi_workflows.supervisor.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "slow = [m for m in ('typer', 'pydantic', 'pydantic_settings', 'psutil', 'filelock')"
    " if m in sys.modules]\n"
    "sys.exit(99 if slow else code)\n"
)
# The read commands load no dataclasses either (``protocol.record``): its import
# and class machinery were a fifth of a `status --json`.
READ_PROBE = FAST_PROBE.replace("'filelock')", "'filelock', 'dataclasses', 'inspect')")


def _run(project: Project, args: list[str], env: dict[str, str], *,
         probe: bool = False, read: bool = False) -> subprocess.CompletedProcess[str]:
    head = [sys.executable, "-c", READ_PROBE if read else FAST_PROBE] if probe else \
        [sys.executable, "-m", "pi_workflows"]
    return subprocess.run([*head, *args], env=env, capture_output=True, text=True, timeout=60,
                          cwd=project.root)


def _both(project: Project, args: list[str], extra: dict[str, str] | None = None,
          ) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    env = {**project.env, **(extra or {})}
    fast = _run(project, args, env)
    full = _run(project, args, {**env, "PI_WORKFLOWS_NO_FAST_CLI": "1"})
    return fast, full


def _same(project: Project, args: list[str], extra: dict[str, str] | None = None,
          ) -> subprocess.CompletedProcess[str]:
    fast, full = _both(project, args, extra)
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        full.returncode, full.stdout, full.stderr), args
    assert "Traceback" not in fast.stderr, fast.stderr
    return fast


@pytest.mark.timeout(240)
def test_the_fast_path_answers_exactly_as_typer(project: Project, tmp_path: Path) -> None:
    project.write_workflow("review", REVIEW)
    project.write_workflow("quick", ONE_NODE)
    assert project.cli("run", "review", "the", "docs", check=False).returncode == 3
    parent = json.loads(project.cli("list", "--json").stdout)["runs"][0]["runId"]
    project.cli("answer", parent, "yes")  # a queued continuation: a chain of two
    assert project.cli("run", "quick", check=False).returncode == 0
    queued = project.detach("quick")
    where = ["--project", str(project.root)]
    empty = tmp_path / "empty"
    empty.mkdir()

    good = [
        ["status", parent, "--json"], ["status", parent.rsplit("-", 1)[1], "--json"],
        ["status", queued[:-2], "--json"], ["status", "--json"],
        ["status", "--json", "--session", "nobody"], ["list", "--json"],
        ["list", "--json", "--state", "waiting"], ["list", "--json", "--state", "answered"],
        ["list", "--workflow", "quick", "--limit", "1", "--json"],
        ["list", "--json", "--since", "2h"], ["list", "--json", "--state", "queued/running"],
        ["list", "--json", "--until", "0s", "--since", "2h"], ["list", "--json", "--until", "1h"],
        ["list", "--json", "--offset", "1", "--limit", "2"], ["list", "--json", "--offset", "0"],
    ]
    for args in good:
        out = _same(project, [*args, *where])
        assert out.returncode == 0 and json.loads(out.stdout)
        assert _run(project, [*args, *where], project.env, probe=True,
                    read=True).returncode == 0, args
    # The current directory is the default project.
    _same(project, ["status", parent, "--json"])

    errors = [
        ["status", "deadbeef", "--json", *where],  # no such run
        ["status", "2026", "--json", *where],  # ambiguous prefix
        ["status", "bad id!", "--json", *where], ["status", "x" * 300, "--json", *where],
        ["status", "--json", "--session", "bad session!", *where],
        ["status", parent, "--json", "--project", str(tmp_path / "nowhere")],
        ["status", parent, "--json", "--project", str(empty)],  # no store yet
        ["list", "--json", "--state", "bogus", *where], ["list", "--json", "--since", "x", *where],
        ["list", "--json", "--limit", "0", *where], ["list", "--json", "--limit", "x", *where],
        ["list", "--json", "--limit", str(2 ** 63), *where],
        ["list", "--json", "--offset", str(2 ** 63), *where],
        ["list", "--json", "--until", "x", *where],
        ["list", "--json", "--until", "2h", "--since", "1h", *where],
        ["sync", "--json", *where], ["sync", "--json", "--session", "no good", *where],
    ]
    for args in errors:
        out = _same(project, args)
        assert out.returncode != 0 and out.stderr.startswith("pi-workflows: error: "), args
        assert len(out.stderr.splitlines()) == 1, out.stderr
    nothing = _same(project, ["list", "--json", "--project", str(empty)])
    assert json.loads(nothing.stdout) == {"runs": []}

    # Left to typer: help, unknown or repeated options, --opt=value, one argument too many,
    # human output (whose times move: only an error is compared).
    for args in (["status", "--help"], ["status", "--json", "--bogus", *where],
                 ["status", "--json", "--json", *where], [f"--project={project.root}"],
                 ["status", "a", "b", "--json", *where], ["list", "--json", "--project"],
                 ["list", "--json", "--offset", "007", *where],
                 ["--debug", "status", parent, "--json", *where], ["status", "deadbeef", *where]):
        _same(project, args)

    # Settings: odd but valid values, bad ones, and the config file's errors.
    args = ["status", parent, "--json", *where]
    home = Path(project.env["PI_WORKFLOWS_HOME"])
    for extra in ({"PI_WORKFLOWS_LEASE_MS": "abc"}, {"PI_WORKFLOWS_RENEW_MS": "9000"},
                  {"PI_WORKFLOWS_LEASE_MS": "030000"}, {"PI_WORKFLOWS_SESSION": ""},
                  {"PI_WORKFLOWS_SESSION": "editor-1"},
                  {"PI_WORKFLOWS_CONFIG": str(tmp_path / "missing.toml")}):
        _same(project, args, extra)
        _same(project, ["status", "--json", *where], extra)
    for text in ('leas_ms = 1\n', 'lease_ms = "x"\n', 'lease_ms = [\n', 'fsync = "never"\n'):
        (home / "config.toml").write_text(text)
        _same(project, args)
    (home / "config.toml").unlink()


@pytest.mark.timeout(120)
def test_sync_on_the_fast_path_catches_up_as_typer_does(project: Project) -> None:
    """Two fresh sessions, one synced each way: the same snapshot, names aside, twice."""
    project.write_workflow("review", REVIEW)
    assert project.cli("run", "review", "a", "task", check=False).returncode == 3
    where = ["--project", str(project.root)]
    for _ in range(2):  # a first sync, then one with nothing new
        fast = _run(project, ["sync", "--json", "--session", "sess-fast", *where], project.env)
        full = _run(project, ["sync", "--json", "--session", "sess-full", *where],
                    {**project.env, "PI_WORKFLOWS_NO_FAST_CLI": "1"})
        assert (fast.returncode, fast.stderr) == (full.returncode, full.stderr) == (0, "")
        assert fast.stdout == full.stdout.replace("sess-full", "sess-fast")
        assert json.loads(fast.stdout)["session"] == "sess-fast"
    probe = _run(project, ["sync", "--json", "--session", "sess-probe", *where], project.env,
                 probe=True, read=True)
    assert probe.returncode == 0, probe.stderr


def _masked(text: str, run_id: str) -> str:
    if run_id:
        text = text.replace(run_id, "<this run>")
    return re.sub(r"\d{8}T\d{6}Z-[a-z0-9_-]+-[0-9a-f]{8}", "<new run>", text)


@pytest.mark.timeout(240)
def test_run_detach_answer_and_cancel_write_as_typer_does(project: Project) -> None:
    """Each way acts on its own twin run; the outputs match with run ids masked."""
    project.write_workflow("review", REVIEW)
    project.write_workflow("quick", ONE_NODE)
    where = ["--project", str(project.root)]
    slow = {**project.env, "PI_WORKFLOWS_NO_FAST_CLI": "1"}

    def twins(fast_args: list[str], full_args: list[str], ids: tuple[str, str] = ("", "")
              ) -> subprocess.CompletedProcess[str]:
        fast = _run(project, [*fast_args, *where], project.env)
        full = _run(project, [*full_args, *where], slow)
        shown = [(p.returncode, _masked(p.stdout, i), _masked(p.stderr, i))
                 for p, i in ((fast, ids[0]), (full, ids[1]))]
        assert shown[0] == shown[1], fast_args
        return fast

    for args in (["run", "quick", "--detach", "--json"],
                 ["run", "quick", "some", "words", "--detach", "--json", "--session", "s-1"],
                 ["run", "review", "--detach", "--json", "--input-json", '{"task": "t"}']):
        out = twins(args, args)
        assert out.returncode == 0 and json.loads(out.stdout)["state"] == "queued"
        assert "no host is running" in out.stderr
        assert _run(project, [*args, *where], project.env, probe=True).returncode == 0, args
    for args in (["run", "nosuch", "--detach", "--json"],
                 ["run", "quick", "w", "--detach", "--json", "--input-json", "{}"],
                 ["run", "quick", "--detach", "--json", "--input-json", "{bad"],
                 ["run", "quick", "--detach", "--json", "--input-file", "/nonexistent.json"],
                 ["run", "quick", "--detach", "--json", "--session", "bad session"],
                 ["run", "--detach", "--json"]):
        out = _same(project, [*args, *where])
        assert out.returncode != 0, args

    # Two waiting runs: one answered each way; then errors on what is left.
    waiting = []
    for _ in range(2):
        assert project.cli("run", "review", "x", check=False).returncode == 3
        waiting.append(json.loads(project.cli("list", "--json", "--state", "waiting")
                                  .stdout)["runs"][0]["runId"])
    assert waiting[0] != waiting[1]
    out = twins(["answer", waiting[0], "yes", "--json"], ["answer", waiting[1], "yes", "--json"],
                (waiting[0], waiting[1]))
    assert out.returncode == 0 and json.loads(out.stdout)["parentRunId"] == waiting[0]
    for args in (["answer", waiting[0], "again", "--json"],  # names its continuation
                 ["answer", waiting[0], "--json"], ["answer", "deadbeef", "y", "--json"],
                 ["answer", "bad id!", "y", "--json"],
                 ["answer", waiting[0], "y", "--json", "--input-json", "1"]):
        out = _same(project, [*args, *where])
        assert out.returncode != 0 and len(out.stderr.splitlines()) == 1, args

    # Two queued runs: one cancelled each way; then a second cancel, and no such run.
    queued = [project.detach("quick") for _ in range(2)]
    out = twins(["cancel", queued[0], "--json"], ["cancel", queued[1], "--json"],
                (queued[0], queued[1]))
    assert json.loads(out.stdout)["state"] == "cancelled"
    for args in (["cancel", queued[0], "--json"], ["cancel", "deadbeef", "--json"],
                 ["cancel", queued[0], "--no-wait", "--json"]):
        out = _same(project, [*args, *where])
        assert out.returncode != 0, args

    # `start` (the Pi extension's tool call): a reservation each way, then the errors.
    out = twins(["start", "quick", "w", "--json", "--session", "sf"],
                ["start", "quick", "w", "--json", "--session", "ss"])
    assert out.returncode == 0 and json.loads(out.stdout)["queued"] is True
    assert _run(project, ["start", "quick", "--json", "--session", "sp", *where], project.env,
                probe=True).returncode == 0
    for args in (["start", "quick", "--json", "--session", "sf"],  # busy
                 ["start", "quick", "--json"],  # no session
                 ["start", "nosuch", "--json", "--session", "s9"],
                 ["start", "quick", "--json", "--session", "s9", "--input-json", "{bad"]):
        out = _same(project, [*args, *where])
        assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, args
    # `resolve-follow-up` with a token that holds nothing: the same refusal both ways.
    for args in (["resolve-follow-up", "ti-none", "--token", "t", "--json"],
                 ["resolve-follow-up", "ti-none", "--json"]):  # no token: left to typer
        out = _same(project, [*args, *where])
        assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, args
    assert _run(project, ["resolve-follow-up", "ti-none", "--token", "t", "--json", *where],
                project.env, probe=True).returncode == 2

HOST_PROBE = (
    "import sys\n"
    "from pi_workflows.supervisor.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "slow = [m for m in ('typer', 'pydantic', 'pydantic_settings') if m in sys.modules]\n"
    "sys.exit(99 if slow else code)\n"
)


@pytest.mark.timeout(120)
def test_a_foreground_host_starts_without_typer_and_serves(project: Project) -> None:
    """`host` on the fast path: runs a queued run, drains on SIGTERM, never loads typer."""
    project.write_workflow("quick", ONE_NODE)
    run_id = project.detach("quick")
    proc = subprocess.Popen([sys.executable, "-c", HOST_PROBE, "host", "--project",
                             str(project.root), "--concurrency", "1", "--", "--no-tools"],
                            env=project.env, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        wait_for(lambda: project.row(run_id).state == "done", timeout=60,
                 what="the queued run to finish under the fast-path host")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        reap(proc)
    assert proc.returncode == 0, err  # 99: typer or pydantic was loaded
    assert "concurrency 1" in err and "Traceback" not in err

    # Its errors, and what it leaves to typer, are worded exactly as typer words them.
    for args in (["host", "--project", str(project.root / "nowhere")],
                 ["host", "--concurrency", "0", "--project", str(project.root)],
                 ["host", "--concurrency", "x", "--project", str(project.root)],
                 ["host", "--json", "--project", str(project.root)],
                 ["host", "--background", "--stop"], ["host", "--help"]):
        out = _same(project, args)
        assert (out.returncode == 0) == (args[-1] == "--help"), args
    _same(project, ["host", "--project", str(project.root)], {"PI_WORKFLOWS_LEASE_MS": "abc"})


@pytest.mark.timeout(180)
def test_bad_input_is_the_same_usage_error_both_ways(project: Project) -> None:
    """Issue 21 item 19: cases that once ended in exit 70 on one path or both."""
    project.write_workflow("review", REVIEW)
    assert project.cli("run", "review", "x", check=False).returncode == 3
    waiting = json.loads(project.cli("list", "--json", "--state", "waiting")
                         .stdout)["runs"][0]["runId"]
    where = ["--project", str(project.root)]
    bad = os.fsdecode(b"yes \xff")  # passed to the child as the bytes b"yes \xff"
    for args in (["answer", waiting, bad, "--json"], ["answer", waiting, bad],
                 ["answer", waiting, "--input-json", '"\\ud800"', "--json"],
                 ["run", "review", bad, "--detach", "--json"],
                 ["list", "--json", "--limit", str(2**63)], ["list", "--limit", "9" * 5000],
                 ["list", "--json", "--limit", "9" * 5000]):
        out = _same(project, [*args, *where])
        assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, (args[:3], out.stderr)
    for extra in ({"PI_WORKFLOWS_LEASE_MS": "1180591620717411303424"},
                  {"PI_WORKFLOWS_LEASE_MS": "9" * 5000},
                  {"PI_WORKFLOWS_POLL_INTERVAL_S": "1e400"},
                  {"PI_WORKFLOWS_DRAIN_GRACE_S": "nan"},
                  {"PI_WORKFLOWS_CRASH_WINDOW_S": "inf"},
                  {"PI_WORKFLOWS_RESTART_BACKOFF_S": "-1"}):
        for args in (["status", waiting, "--json"], ["list", "--json"], ["host"]):
            out = _same(project, [*args, *where], extra)
            assert out.returncode == 2 and out.stderr.startswith(
                "pi-workflows: error: invalid setting "), (args, out.stderr)


HOLDING = HOLD + """
from pi_workflows import define_workflow, compute
workflow = define_workflow(start_at="hold", nodes=[compute("hold", hold("hold"))])
"""
TIMES = re.compile(r"\b\d\d:\d\d:\d\d\b")


def _held(project: Project, args: list[str], env: dict[str, str], *,
          probe: bool = False) -> subprocess.CompletedProcess[str]:
    """A session runner as the Pi extension starts it: stdin a pipe held open all along."""
    head = [sys.executable, "-c", HOST_PROBE] if probe else [sys.executable, "-m", "pi_workflows"]
    read, write = os.pipe()
    try:
        return subprocess.run([*head, *args], stdin=read, env=env, capture_output=True,
                              text=True, timeout=60, cwd=project.root)
    finally:
        os.close(read)
        os.close(write)


def _shown(proc: subprocess.CompletedProcess[str], run_id: str, session: str = "",
           ) -> tuple[int, str, str]:
    """What a session runner printed, its run id, clock times and ``session`` masked."""
    def mask(text: str) -> str:
        text = TIMES.sub("<time>", _masked(text, run_id))
        return text.replace(session, "<session>") if session else text

    return proc.returncode, mask(proc.stdout), mask(proc.stderr)


@pytest.mark.timeout(240)
def test_activate_for_the_pi_extension_runs_as_typer_does(project: Project) -> None:
    """Twin reservations, one activated each way: the same lines and exit code, then its
    errors, and a park on the lifeline (the Pi that spawned the runner gone)."""
    project.write_workflow("quick", ONE_NODE)
    project.write_workflow("review", REVIEW)
    project.write_workflow("holding", HOLDING)
    where = ["--project", str(project.root)]
    slow = {**project.env, "PI_WORKFLOWS_NO_FAST_CLI": "1"}

    def reserve(name: str, session: str, *task: str) -> str:
        out = project.cli("start", name, *task, "--session", session, "--json")
        return str(json.loads(out.stdout)["runId"])

    def activate(session: str) -> list[str]:
        return ["activate", "--session", session, "--park-on-eof", *where]

    # Completed (0), waiting at a checkpoint (3), failed (1: no task for the draft);
    # then nothing left to activate (0).
    for case, (name, task, code) in enumerate((("quick", [], 0), ("review", ["t"], 3),
                                                ("review", [], 1))):
        ids = reserve(name, f"c{case}-fast", *task), reserve(name, f"c{case}-full", *task)
        fast = _held(project, activate(f"c{case}-fast"), project.env)
        full = _held(project, activate(f"c{case}-full"), slow)
        assert _shown(fast, ids[0], f"c{case}-fast") == _shown(full, ids[1], f"c{case}-full")
        assert fast.returncode == code and "Traceback" not in fast.stderr, fast
        assert project.row(ids[0]).state == project.row(ids[1]).state
    nothing = _held(project, activate("c0-fast"), project.env)
    assert _shown(nothing, "", "c0-fast") == _shown(
        _held(project, activate("c0-full"), slow), "", "c0-full")
    assert (nothing.returncode, nothing.stdout) == (0, "nothing to activate for session c0-fast\n")
    # Without typer or pydantic.
    probed = reserve("quick", "probe")
    assert _held(project, activate("probe"), project.env, probe=True).returncode == 0
    assert project.row(probed).state == "done"

    # Its errors, and the forms it leaves to typer, are typer's exactly.
    plain = {k: v for k, v in project.env.items() if k != "PI_WORKFLOWS_SESSION"}
    for args, extra in (
            (["activate", "--session", "bad session!", "--park-on-eof", *where], {}),
            (["activate", "--session", "s1", "--park-on-eof", "--project",
              str(project.root / "nowhere")], {}),
            (activate("s1"), {"PI_WORKFLOWS_LEASE_MS": "abc"}),
            (["activate", "--park-on-eof", *where], {}),  # no session: typer's
            (["activate", "--session", "s1", "--park-on-eof", "--json", *where], {}),
            (["activate", "--session", "s1", *where], {}),  # no lifeline: typer's
            (["activate", "--session", "s1", "--park-on-eof", "--session", "s2", *where], {}),
            (["activate", "--session", "s1", "--park-on-eof", "extra", *where], {}),
            (["activate", "--session", "s1", "--park-on-eof", "--help"], {})):
        fast = _held(project, args, {**plain, **extra})
        full = _held(project, args, {**plain, **extra, "PI_WORKFLOWS_NO_FAST_CLI": "1"})
        assert _shown(fast, "") == _shown(full, ""), args
        assert "Traceback" not in fast.stderr, fast.stderr
        assert fast.returncode == 0 or len(fast.stderr.splitlines()) == 1, (args, fast.stderr)

    # The lifeline: once the pipe's other end closes, the run parks (4) where it was.
    parked = []
    for number, (session, env) in enumerate((("hold-fast", project.env),
                                             ("hold-full", slow)), start=1):
        run_id = reserve("holding", session)
        proc = subprocess.Popen([sys.executable, "-m", "pi_workflows", *activate(session)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=project.root,
                                start_new_session=True)
        try:
            wait_for(lambda n=number: len(project.lines("hold.started")) == n, timeout=60,
                     what="the held node to start under activate")
            out, err = proc.communicate(timeout=60)  # closes stdin first
        finally:
            reap(proc)
        parked.append(_shown(subprocess.CompletedProcess([], proc.returncode, out, err),
                             run_id, session))
        assert proc.returncode == 4 and project.row(run_id).state == "parked", (out, err)
    assert parked[0] == parked[1]
