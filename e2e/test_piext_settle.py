"""The extension's settle at the end of a turn: its `status` and `sync` side by side, and
no store made in a project that never had a run.

A real Pi (RPC mode, the scripted model) whose ``PI_WORKFLOWS_BIN`` is a bash shim that
logs each call's start and end (``$EPOCHREALTIME``) and its words, then runs this
checkout's ``pi-workflows``. Once the store exists, a turn's ``sync --hold-follow-ups``
starts before that turn's ``status --nodes`` has ended (the settle does not wait on one
process to start the other); before, ``status`` goes alone, and, finding no store, the
settle runs no ``sync`` (which would make the store).
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import pytest

from .harness import Project, wait_for
from .piext_kit import BIN, STEP_S, extension_drill, steps
from .scripted_model import Text
from .sessions_kit import QUICK

pytestmark = pytest.mark.slow  # real processes: an e2e drill

SHIM = """#!/usr/bin/env bash
t0=$EPOCHREALTIME
case " $* " in
  *" --park-on-eof "*) exec {real} "$@" ;;
esac
# stderr kept whole before the call is logged, so a failure can name it (a tee in a
# process substitution may not have written yet when the test reads the file).
err=$(mktemp)
{real} "$@" 2>"$err"
rc=$?
cat "$err" >&2
cat "$err" >> {log}.err
rm -f "$err"
printf '%s\\t%s\\t%s\\t%s\\n' "$t0" "$EPOCHREALTIME" "$rc" "$*" >> {log}
exit $rc
"""

Call = tuple[float, float, int, list[str]]  # start, end (epoch s), exit code, the words


def _shim(tmp_path: Path) -> tuple[Path, Path]:
    log, shim = tmp_path / "calls.tsv", tmp_path / "pi-workflows-shim"
    shim.write_text(SHIM.format(real=shlex.quote(str(BIN)), log=shlex.quote(str(log))))
    shim.chmod(0o755)
    return shim, log


def _calls(log: Path, word: str, flag: str) -> list[Call]:
    out = []
    for line in log.read_text().splitlines() if log.exists() else []:
        t0, t1, rc, args = line.split("\t", 3)
        words = args.split()
        if words[:1] == [word] and flag in words:
            out.append((float(t0), float(t1), int(rc), words))
    return out


@pytest.mark.timeout(150)
def test_with_no_store_the_settle_runs_status_alone_and_makes_no_store(
        project: Project, tmp_path: Path) -> None:
    shim, log = _shim(tmp_path)
    with extension_drill(project, steps(Text("one"), Text("two")), tmp_path / "pi") as drill:
        drill.pi_env.env["PI_WORKFLOWS_BIN"] = str(shim)
        pi = drill.open()
        for n, text in enumerate(("hello", "again"), start=1):
            assert pi.request({"type": "prompt", "message": text})["success"]
            drill.model.wait_for_requests(n, STEP_S)
            # The turn's settle: its status call has ended (and any sync would follow it).
            wait_for(lambda n=n: len(_calls(log, "status", "--nodes")) >= n + 1, timeout=STEP_S,
                     what="the settle's status call")
        time.sleep(1.0)  # what a sync after the last status would have taken
        drill.check()
    statuses = _calls(log, "status", "--nodes")
    assert statuses and all(rc != 0 for _, _, rc, _ in statuses), statuses
    assert _calls(log, "sync", "--hold-follow-ups") == []
    assert not project.paths.store_file.exists()


@pytest.mark.timeout(150)
def test_once_the_store_exists_sync_starts_beside_status(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("quick", QUICK)
    assert project.cli("run", "quick", "--detach", "--json").returncode == 0  # the store
    shim, log = _shim(tmp_path)
    turns = 3
    with extension_drill(project, steps(*(Text(f"turn {i}") for i in range(turns))),
                         tmp_path / "pi") as drill:
        drill.pi_env.env["PI_WORKFLOWS_BIN"] = str(shim)
        pi = drill.open()
        # The session start's settle, then the extension's one look-up of the store's path.
        wait_for(lambda: bool(_calls(log, "paths", "--json")), timeout=STEP_S,
                 what="the extension's paths call")
        for n in range(1, turns + 1):
            assert pi.request({"type": "prompt", "message": f"say {n}"})["success"]
            drill.model.wait_for_requests(n, STEP_S)
            wait_for(lambda n=n: len(_calls(log, "sync", "--hold-follow-ups")) >= n + 1,
                     timeout=STEP_S, what="the settle's sync call")
        # The last turn's status too has ended before Pi is shut down: a call still
        # writing when its reader goes is cut off, which is not what is tested here.
        wait_for(lambda: len(_calls(log, "status", "--nodes")) >= turns + 1,
                 timeout=STEP_S, what="the last settle's status call")
        drill.check()
    statuses = _calls(log, "status", "--nodes")
    syncs = _calls(log, "sync", "--hold-follow-ups")
    failed = [(rc, words) for _, _, rc, words in statuses + syncs if rc != 0]
    err = log.with_name(log.name + ".err")
    assert not failed, (failed, err.read_text()[-2000:] if err.exists() else "")
    # Each turn's sync ran while its status ran (either may start first: the sync is
    # asked for first); the session start's settle (before the extension had looked up
    # the store's path) ran them one after the other.
    beside = [s for s in syncs if any(t0 < s[1] and s[0] < t1 for t0, t1, _, _ in statuses)]
    assert len(beside) >= turns, (statuses, syncs)
