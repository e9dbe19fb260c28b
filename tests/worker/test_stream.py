"""A shell step's output copied out while it runs: real commands, bounded, never fatal."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from pi_workflows.protocol.bundle import Bundle
from pi_workflows.protocol.bundlewriter import BundleWriter
from pi_workflows.protocol.states import Outcome
from pi_workflows.protocol.store import RunSource, Store
from pi_workflows.worker.control import Control
from pi_workflows.worker.nodes import Watch, run_shell
from pi_workflows.worker.stream import MAX_RUN_BYTES, MAX_STREAM_BYTES, OutputStream, OutputStreams

from tests.helpers.waiting import wait_for


class Sink:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, batch: list[dict[str, Any]]) -> None:
        with self.lock:
            self.records.extend(batch)

    def text(self, stream: str = "stdout") -> str:
        with self.lock:
            return "".join(r.get("text", "") for r in self.records if r["stream"] == stream)


def _shell(command: str, live: OutputStream, *, limit: int = 1 << 20) -> Any:
    watch = Watch(Control(), threading.Event(), 30.0, effectful=True, park_grace_s=5.0)
    return run_shell(["/bin/sh", "-c", command], cwd=None, env=None, stdin=None,
                     max_output_bytes=limit, allow_nonzero_exit=False, watch=watch,
                     timeout_s=30.0, live=live)


@pytest.mark.timeout(30)
def test_a_line_printed_before_a_pause_is_streamed_while_the_command_still_runs(
        tmp_path: Path) -> None:
    sink, go = Sink(), tmp_path / "go"
    live = OutputStream(sink, "build", "build-1-aa", 1 << 20)
    result: dict[str, Any] = {}
    command = (f"echo first; echo oops >&2; while [ ! -e {go} ]; do sleep 0.01; done;"
               " echo second")
    runner = threading.Thread(target=lambda: result.update(out=_shell(command, live)))
    runner.start()
    wait_for(lambda: sink.text() == "first\n" and sink.text("stderr") == "oops\n", 20,
             what="the first lines, streamed", interval=0.005)
    assert runner.is_alive() and not result  # the step has not finished
    go.touch()
    runner.join(20)
    outcome = result["out"]
    assert outcome.outcome == Outcome.OK
    assert outcome.output["stdout"] == sink.text() == "first\nsecond\n"
    assert {(r["nodeId"], r["attemptId"]) for r in sink.records} == {("build", "build-1-aa")}


@pytest.mark.timeout(30)
def test_the_copy_stops_at_its_cap_with_one_truncated_mark_and_keeps_utf8_whole(
        tmp_path: Path) -> None:
    sink = Sink()
    live = OutputStream(sink, "n", "a", 10)
    live.feed("stdout", "héllo".encode()[:2])  # a character split across two reads
    live.feed("stdout", "héllo".encode()[2:] + b" world and more")
    live.feed("stdout", b"even more")
    live.close()
    assert sink.text() == "héllo wor"  # 10 bytes
    marks = [r for r in sink.records if r.get("truncated")]
    assert len(marks) == 1 and marks[0] is sink.records[-1]
    assert OutputStream(sink, "n", "a", 1 << 40)._limit == MAX_STREAM_BYTES
    # A run whose copy is full already: a new attempt only says it was cut.
    full = OutputStreams(sink, lambda: MAX_RUN_BYTES).open("n", "b", 1 << 20)
    full.feed("stdout", b"dropped")
    full.close()
    assert sink.records[-1] == {**sink.records[-1], "attemptId": "b", "truncated": True}
    assert "dropped" not in sink.text()


@pytest.mark.timeout(30)
def test_a_failing_write_stops_the_copy_and_never_the_step(tmp_path: Path) -> None:
    def broken(batch: list[dict[str, Any]]) -> None:
        raise OSError("disk full")

    live = OutputStream(broken, "n", "a", 1 << 20)
    outcome = _shell("echo one; echo two", live)
    assert outcome.outcome == Outcome.OK and outcome.output["stdout"] == "one\ntwo\n"
    assert live.broken


@pytest.mark.timeout(30)
def test_the_bundle_copy_is_fenced_private_and_json_lines(tmp_path: Path) -> None:
    with Store(tmp_path / "store.sqlite3") as store:
        store.enqueue_detached("r1", RunSource("w", "/w.py", "ab" * 32, "sha256:x"), {})
        claim = store.claim_by_id("r1", "me")
        writer = BundleWriter(Bundle(tmp_path / "runs", "r1"), store, claim.token)
        writer.create({"workflow": "w"}, {"nodes": []}, {"status": "running"})
        live = OutputStream(writer.stream_output, "n", "a", 1 << 20)
        live.feed("stdout", b"one\n")
        live.close()
        path = writer.bundle.output_path
        assert path.stat().st_mode & 0o777 == 0o600
        assert [json.loads(line)["text"] for line in path.read_text().splitlines()] == ["one\n"]
        # A writer without the current claim is fenced out; the step would go on.
        stale = BundleWriter(writer.bundle, store, "not-the-token")
        fenced = OutputStream(stale.stream_output, "n", "b", 1 << 20)
        fenced.feed("stdout", b"late\n")
        fenced.close()
        assert fenced.broken
        assert "late" not in path.read_text()
