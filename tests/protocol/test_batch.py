"""``run_command_batch`` with real processes: order, the concurrency bound, timeouts,
output bounds, the checks on its arguments, and a stop that reaches every group."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from pi_workflows import run_command_batch
from pi_workflows.protocol.batch import CommandResult
from pi_workflows.worker.control import Control

from tests.helpers.definitions import make_ctx
from tests.helpers.engine import Harness, file_lines
from tests.helpers.processes import alive
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _nothing_left(tmp_path: Path) -> Iterator[None]:
    """A failing test must not leave its items running: kill what works in its directory."""
    yield
    for proc in psutil.process_iter(["cwd"]):
        cwd = proc.info["cwd"] or ""
        if cwd == str(tmp_path) or cwd.startswith(f"{tmp_path}/"):
            with contextlib.suppress(psutil.Error):
                proc.kill()


def _ctx(tmp_path: Path, cancel: threading.Event | None = None) -> Any:
    return make_ctx(project_dir=tmp_path, cancel=cancel or threading.Event())


def test_results_come_in_input_order_whatever_order_the_items_end_in(tmp_path: Path) -> None:
    items: list[Any] = [
        # Ends last: it waits for the third item to have finished.
        {"command": "while [ ! -e two.done ]; do sleep 0.01; done; echo zero", "timeout": 30},
        ["printf", "%s", "one"],
        "echo two; touch two.done",
    ]
    results = run_command_batch(items, concurrency=3, ctx=_ctx(tmp_path))
    assert [r["stdout"] for r in results] == ["zero\n", "one", "two\n"]
    assert [r["status"] for r in results] == ["succeeded"] * 3
    assert all(r["exitCode"] == 0 and r["error"] is None and not r["truncated"]
               and r["durationS"] >= 0 for r in results)


# Each item counts itself in (under a lock) and records how many ran then, holds until
# the test releases it, and counts itself out: the peak is how many ran at once.
COUNTER = """
import fcntl, os, sys, time
root = sys.argv[1]
def step(delta):
    with open(os.path.join(root, "lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = os.path.join(root, "count")
        n = int(open(path).read() or 0) if os.path.exists(path) else 0
        n += delta
        open(path, "w").write(str(n))
        if delta > 0:
            open(os.path.join(root, "peaks"), "a").write(f"{n}\\n")
step(1)
while not os.path.exists(os.path.join(root, "release")):
    time.sleep(0.01)
step(-1)
"""


@pytest.mark.parametrize("concurrency", [1, 3, 8])
def test_no_more_than_concurrency_items_run_at_once(tmp_path: Path, concurrency: int) -> None:
    items = [[sys.executable, "-c", COUNTER, str(tmp_path)] for _ in range(10)]
    box: dict[str, list[CommandResult]] = {}
    worker = threading.Thread(target=lambda: box.setdefault("r", run_command_batch(
        items, concurrency=concurrency, timeout=40, ctx=_ctx(tmp_path))))
    worker.start()
    # The first ones hold until released: exactly `concurrency` of them get to start.
    wait_for(lambda: len(file_lines(tmp_path / "peaks")) == concurrency, timeout=30,
             what=f"{concurrency} items running")
    (tmp_path / "release").touch()
    worker.join(40)
    assert [r["status"] for r in box["r"]] == ["succeeded"] * 10
    peaks = [int(x) for x in file_lines(tmp_path / "peaks")]
    assert len(peaks) == 10 and max(peaks) == concurrency


def test_an_item_that_outlives_its_timeout_is_stopped_group_and_all(tmp_path: Path) -> None:
    items: list[Any] = [
        {"command": "sleep 300 & echo $! > kid; echo $$ > pid; wait", "timeout": 0.5},
        # Ignores SIGTERM: the group gets SIGKILL after the grace.
        {"command": "trap '' TERM; echo $$ > stubborn; while :; do sleep 0.05; done",
         "timeout": 0.5},
        "echo quick",
    ]
    results = run_command_batch(items, concurrency=3, ctx=_ctx(tmp_path))
    assert [r["status"] for r in results] == ["timed_out", "timed_out", "succeeded"]
    assert results[0]["exitCode"] is None
    assert results[0]["error"] == "the command did not finish within 0.5 s"
    for name in ("kid", "pid", "stubborn"):
        pid = int((tmp_path / name).read_text())
        wait_for(lambda pid=pid: not alive(pid), timeout=10, what=f"{name} {pid} to die")


def test_the_batch_timeout_is_each_items_default(tmp_path: Path) -> None:
    results = run_command_batch(["sleep 30", {"command": "sleep 0.2; echo ok", "timeout": 20}],
                                timeout=0.3, ctx=_ctx(tmp_path))
    assert [r["status"] for r in results] == ["timed_out", "succeeded"]


def test_output_is_bounded_per_stream_and_says_so(tmp_path: Path) -> None:
    results = run_command_batch(
        ["head -c 200000 /dev/zero | tr '\\0' a; echo tail >&2", "echo small"],
        max_output_bytes=1000, ctx=_ctx(tmp_path))
    big, small = results
    assert big["status"] == "succeeded" and big["truncated"] is True
    assert big["stdout"] == "a" * 1000 and big["stderr"] == "tail\n"
    assert small["truncated"] is False and small["stdout"] == "small\n"


def test_a_failing_item_fails_alone(tmp_path: Path) -> None:
    results = run_command_batch(
        ["echo before", "echo oops >&2; exit 3", ["/no/such/program"],
         {"command": "pwd", "cwd": "missing-dir"}, "kill -9 $$", "echo after"],
        ctx=_ctx(tmp_path))
    assert [r["status"] for r in results] == ["succeeded", "failed", "failed", "failed",
                                              "failed", "succeeded"]
    _, nonzero, absent, bad_cwd, killed, _ = results
    assert (nonzero["exitCode"], nonzero["stderr"]) == (3, "oops\n")
    assert nonzero["error"] == "the command exited with status 3"
    assert absent["exitCode"] is None
    assert absent["error"] == "could not start: No such file or directory: /no/such/program"
    assert bad_cwd["error"] == (f"could not start: No such file or directory:"
                                f" {tmp_path / 'missing-dir'}")
    assert (killed["exitCode"], killed["error"]) == (-9, "the command was killed by signal 9")


def test_an_item_dict_takes_cwd_env_and_stdin(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    results = run_command_batch(
        [{"command": 'pwd; echo "$GREETING"; cat', "cwd": "sub", "env": {"GREETING": "hi"},
          "stdin": "from stdin"}, "pwd"],
        ctx=_ctx(tmp_path))
    assert results[0]["stdout"] == f"{tmp_path / 'sub'}\nhi\nfrom stdin"
    assert results[1]["stdout"] == f"{tmp_path}\n"  # the project, by default


def test_an_empty_batch_returns_no_results(tmp_path: Path) -> None:
    assert run_command_batch([], ctx=_ctx(tmp_path)) == []


def test_sixty_four_items_run_and_sixty_five_are_refused(tmp_path: Path) -> None:
    results = run_command_batch([["true"]] * 64, concurrency=8, ctx=_ctx(tmp_path))
    assert len(results) == 64 and {r["status"] for r in results} == {"succeeded"}
    with pytest.raises(ValueError) as err:
        run_command_batch(["touch started"] * 65, ctx=_ctx(tmp_path))
    assert str(err.value) == ("run_command_batch: 65 items; a batch takes at most 64 (split"
                              " the work over several batches or actions)")
    assert not (tmp_path / "started").exists()  # refused before anything started


@pytest.mark.parametrize(("call", "message"), [
    ({"items": "echo hi"}, "items must be a list of commands, got str"),
    ({"items": {"command": "x"}}, "items must be a list of commands, got dict"),
    ({"items": ["true"], "concurrency": 9},
     "concurrency must be a whole number from 1 to 8, got 9"),
    ({"items": ["true"], "concurrency": 0},
     "concurrency must be a whole number from 1 to 8, got 0"),
    ({"items": ["true"], "concurrency": True},
     "concurrency must be a whole number from 1 to 8, got True"),
    ({"items": ["true"], "timeout": -1},
     "timeout must be a positive number of seconds or None, got -1"),
    ({"items": ["true"], "max_output_bytes": -5},
     "max_output_bytes must be a whole number of bytes (0 or more), got -5"),
    ({"items": ["true", ""]}, "item 1: command is an empty string"),
    ({"items": [[]]}, "item 0: command is an empty list"),
    ({"items": [["ls", 3]]}, "item 0: every part of an argv list must be a string"),
    ({"items": [7]}, "item 0: command must be a string (run by /bin/sh -c) or an argv list,"
                     " got int"),
    ({"items": [{"cwd": "x"}]}, "item 0: has no command"),
    ({"items": [{"command": "x", "comand": "y"}]},
     "item 0: unknown key(s) 'comand'; an item takes command, cwd, env, stdin, timeout"),
    ({"items": [{"command": "x", "env": {"A": 1}}]},
     "item 0: env must map variable names to string values"),
    ({"items": [{"command": "x", "stdin": b"x"}]}, "item 0: stdin must be a string, got bytes"),
    ({"items": [{"command": "x", "cwd": 5}]}, "item 0: cwd must be a path (a string), got 5"),
    ({"items": [{"command": "x", "cwd": {"secret": "token"}}]},
     "item 0: cwd must be a path (a string), got a dict"),  # a value is never echoed
    ({"items": ["true"], "timeout": "10 minutes"},
     "timeout must be a positive number of seconds or None, got a str"),
    ({"items": [{"command": "x", "timeout": 0}]},
     "item 0: timeout must be a positive number of seconds or None, got 0"),
])
def test_each_mistake_is_one_clear_sentence(tmp_path: Path, call: dict[str, Any],
                                            message: str) -> None:
    items = call.pop("items")
    with pytest.raises(ValueError) as err:
        run_command_batch(items, ctx=_ctx(tmp_path), **call)
    assert str(err.value) == f"run_command_batch: {message}"


def test_several_mistakes_are_named_together(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as err:
        run_command_batch(["", 3], concurrency=10, ctx=_ctx(tmp_path))
    assert str(err.value).startswith("run_command_batch: 3 problems: concurrency must be")


def test_outside_a_node_it_asks_for_one(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="call it from an action node's function"):
        run_command_batch(["touch started"])
    assert not (tmp_path / "started").exists()


ITEM = "sleep 300 & echo $! >> kids; echo $$ >> pids; wait"


def test_a_stop_ends_every_items_group_and_cancels_the_rest(tmp_path: Path) -> None:
    stop = threading.Event()
    box: dict[str, list[CommandResult]] = {}
    runner = threading.Thread(target=lambda: box.setdefault("r", run_command_batch(
        [ITEM] * 6, concurrency=3, ctx=_ctx(tmp_path, stop))))
    runner.start()
    wait_for(lambda: len(file_lines(tmp_path / "kids")) == 3
             and len(file_lines(tmp_path / "pids")) == 3, timeout=30, what="three items")
    stop.set()
    runner.join(20)
    assert not runner.is_alive()
    results = box["r"]
    assert [r["status"] for r in results] == ["cancelled"] * 6
    assert all(r["exitCode"] is None for r in results)
    assert results[5]["error"] is not None and results[5]["error"].startswith("not started")
    pids = [int(p) for p in file_lines(tmp_path / "pids") + file_lines(tmp_path / "kids")]
    assert len(pids) == 6  # no item started after the stop
    for pid in pids:
        wait_for(lambda pid=pid: not alive(pid), timeout=10, what=f"item process {pid} gone")


def test_a_batch_that_breaks_midway_leaves_no_item_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pi_workflows.protocol import batch

    made: list[int] = []
    real = batch._Capture

    def capture(stream: Any, limit: int) -> Any:
        made.append(1)
        if len(made) == 5:  # the third item's stdout: as if no thread could start
            raise RuntimeError("can't start new thread")
        return real(stream, limit)

    monkeypatch.setattr(batch, "_Capture", capture)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        run_command_batch([ITEM] * 3, concurrency=3, ctx=_ctx(tmp_path))
    for proc in psutil.process_iter(["cwd"]):
        assert not (proc.info["cwd"] or "").startswith(str(tmp_path)) or not alive(proc.pid)


BATCH_FLOW = """
from pi_workflows import run_command_batch

def batch(ctx):
    return {"results": run_command_batch(ctx.input["items"], concurrency=2)}

workflow = define_workflow(start_at="batch", nodes=[action("batch", batch)])
"""


def test_an_action_finds_its_context_by_itself(h: Harness) -> None:
    h.write("batch", BATCH_FLOW)
    run_id = h.launch("batch", {"items": ["echo a", "echo b >&2; exit 1", "pwd"]})
    outcome = h.execute(run_id)
    assert outcome.outcome == "completed", h.state(run_id)
    results = h.state(run_id)["outputs"]["batch"]["results"]
    assert [(r["status"], r["stdout"], r["stderr"]) for r in results] == [
        ("succeeded", "a\n", ""), ("failed", "", "b\n"), ("succeeded", f"{h.project}\n", "")]


def test_a_cancel_of_the_run_stops_every_item(h: Harness) -> None:
    h.write("batch", BATCH_FLOW)
    run_id = h.launch("batch", {"items": [ITEM] * 4})
    control = Control()
    threading.Thread(target=lambda: (
        wait_for(lambda: len(file_lines(h.project / "kids")) == 2, timeout=30,
                 what="two items running"),
        control.request_cancel()), daemon=True).start()
    outcome = h.execute(run_id, control=control)
    assert outcome.outcome == "cancelled"
    pids = [int(p) for p in file_lines(h.project / "pids") + file_lines(h.project / "kids")]
    assert len(pids) == 4
    for pid in pids:
        wait_for(lambda pid=pid: not alive(pid), timeout=10, what=f"item process {pid} gone")


def test_a_park_stops_every_item_once_the_effects_grace_is_over(h: Harness) -> None:
    h.write("batch", BATCH_FLOW)
    run_id = h.launch("batch", {"items": [ITEM] * 3})
    control = Control()
    threading.Thread(target=lambda: (
        wait_for(lambda: len(file_lines(h.project / "kids")) == 2, timeout=30,
                 what="two items running"),
        control.request_park()), daemon=True).start()
    outcome = h.execute(run_id, control=control, park_grace_s=0.2)
    assert outcome.outcome == "parked"
    pids = [int(p) for p in file_lines(h.project / "pids") + file_lines(h.project / "kids")]
    assert len(pids) == 4  # the third item never started
    for pid in pids:
        wait_for(lambda pid=pid: not alive(pid), timeout=10, what=f"item process {pid} gone")
    # Left pending, like a crash mid-effect: a plain action is not run again.
    assert h.execute(run_id).outcome == "failed"
    assert h.row(run_id).error_code == "effect_indeterminate"


def test_a_timeout_too_large_for_a_float_is_refused_like_any_bad_timeout(
        tmp_path: Path) -> None:
    huge = 10 ** 400  # math.isfinite() raises OverflowError for it
    with pytest.raises(ValueError) as err:
        run_command_batch([{"command": "touch started", "timeout": huge}], ctx=_ctx(tmp_path))
    assert "timeout must be a positive number of seconds or None" in str(err.value)
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        run_command_batch(["touch started"], timeout=huge, ctx=_ctx(tmp_path))
    assert not (tmp_path / "started").exists()
