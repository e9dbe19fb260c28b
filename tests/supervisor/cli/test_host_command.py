"""``pi-workflows host``: only the words after ``--`` reach pi; ``--status`` and ``--logs``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pi_workflows.protocol.liveness import process_start_time
from pi_workflows.protocol.paths import resolve_paths
from pi_workflows.protocol.settings import load_settings
from pi_workflows.supervisor.cli.commands import host as host_command

from tests.helpers.cli import run_cli
from tests.helpers.processes import ctrl_c_default
from tests.helpers.waiting import poll

TYPER = {"PI_WORKFLOWS_NO_FAST_CLI": "1"}  # the fast path hands anything unusual to typer


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, **TYPER, **extra}


def _paths(project: Path):  # type: ignore[no-untyped-def]
    return resolve_paths(load_settings(), project)


@pytest.mark.parametrize("args", [["--concurency", "4"], ["--status-please"],
                                  ["--background", "--concurency", "4"]])
def test_an_unknown_option_is_one_line_and_exit_2_and_starts_nothing(
        tmp_path: Path, args: list[str]) -> None:
    done = run_cli("host", "--project", str(tmp_path), *args)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "No such option" in done.stderr
    assert not _paths(tmp_path).host_lock.exists()  # no host was started


def test_a_stray_word_is_refused_only_words_after_the_separator_reach_pi(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    done = run_cli("host", "--project", str(tmp_path), "stray", env=_env())
    assert done.returncode == 2
    assert "unexpected argument 'stray': arguments for pi go after `--`" in done.stderr
    seen: list[list[str]] = []
    monkeypatch.setattr(host_command, "run_foreground",
                        lambda settings, paths, concurrency, pi_args: seen.append(pi_args) or 0)
    done = run_cli("host", "--project", str(tmp_path), "--", "--model", "x", "--thinking", "off",
                   env=_env())
    assert done.returncode == 0, done.stderr
    assert seen == [["--model", "x", "--thinking", "off"]]


def test_status_without_a_host_exits_1(tmp_path: Path) -> None:
    done = run_cli("host", "--status", "--project", str(tmp_path))
    assert done.returncode == 1
    assert "no host is running for this project" in done.stderr
    data = json.loads(run_cli("host", "--status", "--json", "--project", str(tmp_path)).stdout)
    assert data == {"running": False, "log": str(_paths(tmp_path).log_dir / "host.log")}


def test_status_of_a_running_host_shows_pid_uptime_runs_and_log(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    paths.host_lock.parent.mkdir(parents=True, exist_ok=True)
    # The lock as a live host writes it; this test's own process stands in for it.
    paths.host_lock.write_text(json.dumps({
        "pid": os.getpid(), "pidStartTime": process_start_time(), "runnerId": "host-x",
        "startedAt": 0, "ready": True}))
    done = run_cli("host", "--status", "--project", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert f"running, pid {os.getpid()}, up " in done.stdout
    assert "0 run(s) held" in done.stdout and str(paths.log_dir / "host.log") in done.stdout
    data = json.loads(run_cli("host", "--status", "--json", "--project", str(tmp_path)).stdout)
    assert data["running"] is True and data["pid"] == os.getpid()
    assert data["runnerId"] == "host-x" and data["runsHeld"] == 0 and data["uptimeMs"] >= 0


def test_logs_prints_the_host_log_or_says_there_is_none(tmp_path: Path) -> None:
    done = run_cli("host", "--logs", "--project", str(tmp_path))
    assert done.returncode == 1 and "no host log yet" in done.stderr
    log = _paths(tmp_path).log_dir / "host.log"
    log.parent.mkdir(parents=True)
    log.write_text("line one\nline two\n")
    done = run_cli("host", "--logs", "--project", str(tmp_path))
    assert (done.returncode, done.stdout) == (0, "line one\nline two\n")
    for bad in (["--follow"], ["--logs", "--json"], ["--logs", "--status"],
                ["--logs", "--", "--model", "x"]):
        assert run_cli("host", *bad, "--project", str(tmp_path)).returncode == 2, bad


@pytest.mark.timeout(60)
def test_logs_follow_prints_what_the_host_writes_until_ctrl_c(tmp_path: Path) -> None:
    log = _paths(tmp_path).log_dir / "host.log"
    log.parent.mkdir(parents=True)
    log.write_text("before\n")
    out = tmp_path / "out.txt"
    with open(out, "wb") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "pi_workflows", "host", "--logs",
                                 "--follow", "--project", str(tmp_path)], stdout=sink,
                                preexec_fn=ctrl_c_default)
        try:
            assert poll(lambda: out.read_text() == "before\n", timeout=30), out.read_text()
            with open(log, "a") as fh:
                fh.write("after\n")
            assert poll(lambda: out.read_text() == "before\nafter\n", timeout=30), \
                out.read_text()
            proc.send_signal(signal.SIGINT)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
