"""Progress updates as people see them: the words of an update (``watch``, ``logs``),
the bar and the time left at the rate so far (the live view, a fake clock), and
the latest update of the running step (``status --nodes``, the Pi widget)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pi_workflows.protocol.bundle import Bundle
from pi_workflows.protocol.updates import Progress
from pi_workflows.supervisor.views.follower import TraceFollower, describe
from pi_workflows.supervisor.views.progress import (
    ProgressTrack,
    bar,
    dropped_text,
    running_update,
    update_text,
    updates_summary,
)
from pi_workflows.supervisor.views.status import node_states
from pi_workflows.supervisor.views.steplogs import read_steps
from rich.console import Console

from tests.helpers.clocks import FakeClock

ESC = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_an_update_reads_as_a_count_a_share_and_its_words() -> None:
    assert update_text({"progress": {"done": 3, "total": 10}}) == "3/10 (30%)"
    assert update_text({"progress": {"done": 3, "total": 10, "unit": "files",
                                     "message": "copying"}, "message": "half way"}) == \
        "3/10 files (30%) · copying · half way"
    assert update_text({"progress": {"done": 2.5, "unit": "GB"}}) == "2.5 GB"
    assert update_text({"data": {"message": "hello"}, "message": "hello"}) == "hello"
    assert update_text({"message": "an older agent update"}) == "an older agent update"
    assert update_text({"stage": "link"}) == '{"stage": "link"}'
    assert dropped_text({"refused": 2, "overLimit": 0, "error": "parse_line raised X"}) == \
        "2 update(s) refused (the first: parse_line raised X)"
    assert updates_summary([]) is None
    assert updates_summary([{"progress": {"done": 1, "total": 2}},
                            {"progress": {"done": 2, "total": 2}}]) == \
        "progress: 2 updates, the last: 2/2 (100%)"


def test_watch_describes_update_events() -> None:
    event = {"seq": 4, "at": 0, "type": "update_published", "nodeId": "copy",
             "payload": {"data": {"progress": {"done": 3, "total": 10}}}}
    assert describe(event).endswith(" copy: 3/10 (30%)")
    dropped = {"seq": 5, "at": 0, "type": "updates_dropped", "nodeId": "copy",
               "payload": {"refused": 0, "overLimit": 4}}
    assert describe(dropped).endswith(" copy: 4 update(s) over the limit per step not recorded")


def test_the_bar_fills_with_the_share_done() -> None:
    assert bar(0.0, 10) == "░" * 10
    assert bar(0.3, 10) == "███░░░░░░░"
    assert bar(1.7, 10) == "█" * 10


def test_the_time_left_is_the_rate_so_far_counted_down_from_the_last_update() -> None:
    track = ProgressTrack.start(10_000, Progress(2, 10, "files"))
    assert track.left_ms(10_000) is None  # one update: no rate yet
    assert "left" not in track.line(10_000)
    track.see(14_000, Progress(4, 10, "files"), "copying")  # 2 files in 4 s
    assert track.left_ms(14_000) == 12_000
    assert track.left_ms(17_000) == 9_000  # counting down between updates
    assert track.left_ms(40_000) == 0
    assert track.line(14_000) == \
        f"[{bar(0.4)}] 4/10 files (40%) · about 12 s left · copying"
    track.see(20_000, Progress(10, 10, "files"))
    assert track.left_ms(20_000) == 0 and "left" not in track.line(20_000)
    track.see(21_000, Progress(1, 10, "files"))  # a new count from lower
    assert track.left_ms(21_000) is None


class Run:
    def __init__(self, root: Path) -> None:
        self.bundle = Bundle(root, "r1")
        self.bundle.session_dir.mkdir(parents=True)
        self.bundle.workflow_path.write_text(json.dumps(
            {"name": "wf", "nodes": [{"id": "copy", "kind": "shell"},
                                     {"id": "end", "kind": "compute"}]}))
        self.seq = 0

    def event(self, kind: str, at: int, node: str | None = None, **payload: Any) -> None:
        self.seq += 1
        event: dict[str, Any] = {"seq": self.seq, "at": at, "type": kind, "runId": "r1",
                                 "payload": payload}
        if node:
            event.update(nodeId=node, attemptId=f"{node}-a")
        with open(self.bundle.trace_path, "a") as fh:
            fh.write(json.dumps(event) + "\n")
        self.bundle.state_path.write_text(json.dumps(
            {"status": "running", "currentNode": node, "currentAttempt": f"{node}-a",
             "results": {}, "updatedAt": at, "traceSeq": self.seq}))

    def progress(self, at: int, done: int, **extra: Any) -> None:
        data = {"progress": {"done": done, "total": 10, "unit": "files"}, **extra}
        self.event("update_published", at, "copy", data=data)


@pytest.mark.timeout(20)
def test_the_live_view_draws_a_bar_with_the_time_left_and_prints_plain_messages(
        tmp_path: Path) -> None:
    from pi_workflows.supervisor.views.live import LiveView

    run, clock = Run(tmp_path), FakeClock(0)
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, force_interactive=True, width=120,
                      color_system=None, highlight=False)
    view, follower = LiveView(console=console, clock=clock), TraceFollower(run.bundle)
    run.event("run_started", 1000, workflow="wf")
    run.event("node_started", 1000, "copy", step=1)
    run.progress(2000, 1)
    run.event("update_published", 2500, "copy", data={"message": "found 10 files"},
              message="found 10 files")
    run.progress(4000, 3, message="copying")
    clock.now = 5000
    view.show(follower)
    text = ESC.sub("", out.getvalue()).replace("\r", "")
    assert "copy: found 10 files" in text  # a message without progress: kept above
    # 2 files in 2 s: 7 more take 7 s, 1 s of which has passed since the last update.
    assert f"copy  [{bar(0.3)}] 3/10 files (30%) · about 6 s left · copying" in text
    assert "copy: 3/10" not in text  # progress goes to the bar, not above it
    run.progress(6000, 7)
    clock.now = 6000
    view._drawn = 0.0  # the next poll, past the redraw interval
    view.show(follower)
    later = ESC.sub("", out.getvalue()).replace("\r", "")[len(text):]
    assert f"[{bar(0.7)}] 7/10 files (70%) · about 2 s left" in later
    run.event("node_finished", 7000, "copy", output={"n": 10}, result={"outcome": "ok"},
              next="end")
    clock.now = 7000
    view._drawn = 0.0
    view.show(follower)
    rest = ESC.sub("", out.getvalue()).replace("\r", "")[len(text) + len(later):]
    assert "7/10 files" not in rest  # the bar goes with its step
    view.close()


def test_logs_and_the_widget_read_the_updates_of_a_step(tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.event("run_started", 1000, workflow="wf")
    run.event("node_started", 1000, "copy", step=1)
    run.progress(2000, 1)
    run.progress(3000, 4, message="copying")
    step, = read_steps(run.bundle)
    assert step.updates == [{"progress": {"done": 1, "total": 10, "unit": "files"}},
                            {"progress": {"done": 4, "total": 10, "unit": "files"},
                             "message": "copying"}]
    assert step.as_json()["updates"] == step.updates
    assert running_update(run.bundle, "copy-a") == step.updates[-1]
    assert running_update(run.bundle, "other") is None
    copy, end = node_states(tmp_path, "r1")
    assert copy["state"] == "running" and copy["update"] == step.updates[-1]
    assert "update" not in end


@pytest.mark.timeout(20)
def test_logs_keep_the_exit_code_of_a_shell_step_whose_parse_shaped_the_output(
        tmp_path: Path) -> None:
    from pi_workflows.supervisor.cli.commands.logs import body

    run = Run(tmp_path)
    run.event("run_started", 1000, workflow="wf")
    run.event("node_started", 1000, "copy", step=1)
    # parse= made the output; the exit status is only in the result record.
    run.event("node_finished", 2000, "copy", output={"copied": 2},
              result={"outcome": "ok", "errorCode": None, "error": None, "exitCode": 3},
              next="end")
    step, = read_steps(run.bundle)
    assert step.as_json()["exitCode"] == 3
    assert "(exit code 3)" in body(step)
    run.event("node_started", 2000, "end", step=2)
    run.event("node_finished", 2500, "end", output={"n": 1},
              result={"outcome": "ok", "errorCode": None, "error": None}, next=None)
    _, end = read_steps(run.bundle)
    assert end.as_json()["exitCode"] is None and "exit code" not in body(end)


def test_node_update_is_the_latest_of_the_nodes_current_attempt(tmp_path: Path) -> None:
    from pi_workflows.supervisor.views.progress import node_update
    bundle = Bundle(tmp_path, "20261201T000000Z-x-00000000")
    bundle.dir.mkdir(parents=True)
    events = [
        {"type": "node_started", "nodeId": "a", "attemptId": "a-1"},
        {"type": "update_published", "nodeId": "a", "attemptId": "a-1",
         "payload": {"data": {"message": "old"}}},
        {"type": "node_started", "nodeId": "a", "attemptId": "a-2"},
    ]
    bundle.trace_path.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert node_update(bundle, "a") is None  # the new attempt has published nothing yet
    with open(bundle.trace_path, "a") as fh:
        fh.write(json.dumps({"type": "update_published", "nodeId": "a", "attemptId": "a-2",
                              "payload": {"data": {"message": "new"}}}) + "\n")
        fh.write('{"type": "update_pub')  # a torn last line
    assert node_update(bundle, "a") == {"message": "new"}
    assert node_update(bundle, "b") is None
