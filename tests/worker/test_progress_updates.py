"""Progress updates on their way into the trace: their shape and bounds
(``protocol.updates``), one attempt's rate limit, dedupe and count cap
(``worker.updates``, a fake clock and a fake timer), and a shell node's output
lines split and handed to ``parse_line``'s function (``worker.lines``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pi_workflows import parse_line
from pi_workflows.protocol.updates import (
    MAX_UPDATE_BYTES,
    UpdateError,
    event_payload,
    normalize_update,
    progress_of,
    update_data,
)
from pi_workflows.worker.lines import MAX_LINE_BYTES, LineTap
from pi_workflows.worker.updates import AttemptUpdates

from tests.helpers.clocks import FakeClock

# ---- the shape of one update ---------------------------------------------------------


def test_text_is_a_message_and_an_object_is_kept() -> None:
    assert normalize_update("  reading\n the   changelog ") == {"message": "reading the changelog"}
    data = {"progress": {"done": 3, "total": 10, "unit": "files"}, "message": "copying"}
    assert normalize_update(data) == data
    assert event_payload(normalize_update(data)) == {"data": data, "message": "copying"}
    assert event_payload({"progress": {"done": 1}}) == {"data": {"progress": {"done": 1}}}


def test_secrets_in_any_string_are_redacted() -> None:
    data = normalize_update({"message": "login password=hunter2", "detail": {"t": "token: abc"},
                             "progress": {"done": 1, "total": 2, "message": "Bearer xyz"}})
    text = repr(data)
    assert "hunter2" not in text and "abc" not in text and "xyz" not in text
    assert data["message"] == "login password=[redacted]"


@pytest.mark.parametrize(("value", "reason"), [
    (None, "must be a JSON object or text, got NoneType"),
    ([1, 2], "must be a JSON object or text, got list"),
    ({}, "an update is empty"),
    ("", "an update is empty"),
    ({"message": 3}, "message must be text"),
    ({"progress": 3}, "progress must be an object"),
    ({"progress": {"total": 3}}, "progress.done must be a number of at least 0"),
    ({"progress": {"done": -1, "total": 3}}, "progress.done must be a number of at least 0"),
    ({"progress": {"done": True, "total": 3}}, "progress.done must be a number"),
    ({"progress": {"done": 1, "total": 0}}, "progress.total must be a number above 0"),
    ({"progress": {"done": 1, "unit": 5}}, "progress.unit must be text"),
    ({"x": float("nan")}, "JSON cannot carry"),
    ({"x": object()}, "must be JSON, but it holds a object"),
    ({1: "a"}, "keys must be strings"),
    ({"blob": "x" * MAX_UPDATE_BYTES}, f"at most {MAX_UPDATE_BYTES}"),
])
def test_a_malformed_update_is_refused_with_one_sentence(value: Any, reason: str) -> None:
    with pytest.raises(UpdateError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        normalize_update(value)


def test_reading_a_recorded_progress_is_tolerant() -> None:
    assert progress_of({"progress": {"done": 3, "total": 10}}).fraction == pytest.approx(0.3)
    assert progress_of({"progress": {"done": 12, "total": 10}}).fraction == 1.0
    assert progress_of({"progress": {"done": 3}}).fraction is None
    assert progress_of({"progress": {"done": "3"}}) is None
    assert progress_of("text") is None
    assert update_data({"message": "old shape"}) == {"message": "old shape"}
    assert update_data({"data": {"progress": {"done": 1}}}) == {"progress": {"done": 1}}
    assert update_data(None) == {}


# ---- one attempt: rate limit, dedupe, count cap ---------------------------------------


class Timers:
    """A fake ``schedule``: the test fires what is due."""

    def __init__(self) -> None:
        self.armed: list[tuple[float, Callable[[], None], list[bool]]] = []

    def __call__(self, delay: float, fn: Callable[[], None]) -> Any:
        cancelled = [False]
        self.armed.append((delay, fn, cancelled))

        class Handle:
            def cancel(self) -> None:
                cancelled[0] = True
        return Handle()

    def fire(self) -> None:
        armed, self.armed = self.armed, []
        for _, fn, cancelled in armed:
            if not cancelled[0]:
                fn()


def recorder() -> tuple[list[tuple[str, dict[str, Any]]], Callable[[str, dict[str, Any]], None]]:
    seen: list[tuple[str, dict[str, Any]]] = []
    return seen, lambda kind, payload: seen.append((kind, payload))


def progress(done: int, total: int = 10) -> dict[str, Any]:
    return {"progress": {"done": done, "total": total}}


def test_updates_faster_than_the_rate_keep_only_the_latest_which_is_written_later() -> None:
    seen, note = recorder()
    clock, timers = FakeClock(100.0), Timers()
    updates = AttemptUpdates(note, monotonic=clock, schedule=timers, min_interval_s=0.2)
    updates(progress(1))  # the first is written at once
    for done in (2, 3, 4):
        clock.advance(0.05)
        updates(progress(done))
    assert [p["data"] for _, p in seen] == [progress(1)]
    (delay, _, _), = timers.armed  # one timer for the waiting update
    assert delay == pytest.approx(0.15)
    clock.advance(0.05)
    timers.fire()
    assert [p["data"] for _, p in seen] == [progress(1), progress(4)]
    clock.advance(1.0)
    updates(progress(5))  # the interval has passed: written at once
    assert len(seen) == 3 and not timers.armed


def test_the_last_update_waiting_is_written_when_the_attempt_ends() -> None:
    seen, note = recorder()
    clock, timers = FakeClock(0.0), Timers()
    updates = AttemptUpdates(note, monotonic=clock, schedule=timers)
    updates(progress(1))
    updates(progress(9))
    updates.close()
    assert [p["data"] for _, p in seen] == [progress(1), progress(9)]
    timers.fire()  # cancelled by close: nothing more
    updates(progress(10))  # after the end (an abandoned thread): ignored
    assert len(seen) == 2


def test_the_same_update_as_the_last_one_is_not_recorded_twice() -> None:
    seen, note = recorder()
    clock, timers = FakeClock(0.0), Timers()
    updates = AttemptUpdates(note, monotonic=clock, schedule=timers)
    updates("compiling")
    clock.advance(5)
    updates({"message": "compiling"})  # the same update, spelt as an object
    updates("linking")
    clock.advance(0.01)
    updates("compiling")
    updates("linking")  # back to what is recorded: the waiting one is dropped
    updates.close()
    assert [p["message"] for _, p in seen] == ["compiling", "linking"]


def test_at_most_the_cap_is_recorded_and_the_last_progress_still_is() -> None:
    seen, note = recorder()
    clock = FakeClock(0.0)
    updates = AttemptUpdates(note, monotonic=clock, schedule=Timers(), max_count=3)
    for done in range(1, 8):
        clock.advance(1)
        updates(progress(done))
    clock.advance(0.01)
    updates(progress(8))
    updates.close()
    datas = [p["data"] for kind, p in seen if kind == "update_published"]
    assert datas == [progress(1), progress(2), progress(8)]  # one slot kept for the last
    assert seen[-1] == ("updates_dropped", {"refused": 0, "overLimit": 5})


def test_a_malformed_update_raises_in_the_action_and_a_failing_write_stops_the_rest() -> None:
    calls: list[str] = []

    def note(kind: str, payload: dict[str, Any]) -> None:
        calls.append(kind)
        raise OSError("the bundle is gone")

    updates = AttemptUpdates(note, monotonic=FakeClock(0.0), schedule=Timers())
    with pytest.raises(UpdateError, match="got int"):
        updates(5)
    updates("one")  # the write fails: not the action's problem
    updates("two")
    updates.close()
    assert calls == ["update_published"] and updates.broken


# ---- a shell node's lines --------------------------------------------------------------


class Inner:
    def __init__(self) -> None:
        self.fed: list[tuple[str, bytes]] = []
        self.closed = False

    def feed(self, stream: str, chunk: bytes) -> None:
        self.fed.append((stream, chunk))

    def tick(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def tap(fn: Callable[[str], Any], streams: tuple[str, ...] = ("stdout",),
        ) -> tuple[LineTap, list[tuple[str, dict[str, Any]]], list[str], Inner]:
    seen, note = recorder()
    lines: list[str] = []

    def spy(line: str) -> Any:
        lines.append(line)
        return fn(line)

    # No rate limit here: every line's update is written, so the test sees each one.
    updates = AttemptUpdates(note, monotonic=FakeClock(0.0), schedule=Timers(),
                             min_interval_s=0.0)
    inner = Inner()
    return LineTap(parse_line(spy, streams=list(streams)), updates, inner), seen, lines, inner


def test_only_complete_lines_are_passed_and_the_last_one_when_the_stream_ends() -> None:
    line_tap, seen, lines, inner = tap(lambda line: {"message": line})
    for chunk in (b"sta", b"rt\r\nhalf", b" done\n\n", b"caf\xc3", b"\xa9\nno newline"):
        line_tap.feed("stdout", chunk)
    assert lines == ["start", "half done", "", "café"]
    line_tap.feed("stderr", b"not chosen\n")
    line_tap.close()
    assert lines[-1] == "no newline"
    assert [p["message"] for _, p in seen] == ["start", "half done", "café", "no newline"]
    assert inner.closed and inner.fed[0] == ("stdout", b"sta")  # the live copy gets it all
    assert ("stderr", b"not chosen\n") in inner.fed


def test_both_streams_are_split_apart() -> None:
    line_tap, seen, lines, _ = tap(lambda line: None, streams=("stdout", "stderr"))
    line_tap.feed("stdout", b"out 1")
    line_tap.feed("stderr", b"err 1\nerr")
    line_tap.feed("stdout", b" more\n")
    line_tap.feed("stderr", b" 2\n")
    line_tap.close()
    assert lines == ["err 1", "out 1 more", "err 2"]
    assert seen == []  # None: no update


def test_an_over_long_line_is_cut_and_its_rest_skipped() -> None:
    line_tap, _, lines, _ = tap(lambda line: None)
    line_tap.feed("stdout", b"x" * (MAX_LINE_BYTES - 1))
    line_tap.feed("stdout", b"yyyy")
    line_tap.feed("stdout", b"zzzz")
    line_tap.feed("stdout", b"zz\nnext\n")
    line_tap.close()
    assert [len(line) for line in lines] == [MAX_LINE_BYTES, 4]
    assert lines[0].endswith("xy") and lines[1] == "next"


def test_a_raising_or_wrong_function_costs_its_line_only_and_is_counted() -> None:
    def fn(line: str) -> Any:
        if line == "boom":
            raise KeyError("password=s3cret")
        if line == "list":
            return [1]
        return f"saw {line}"

    line_tap, seen, lines, _ = tap(fn)
    line_tap.feed("stdout", b"a\nboom\nlist\nb\nboom\n")
    line_tap.close()
    line_tap.updates.close()  # the engine's, when the attempt ends
    assert lines == ["a", "boom", "list", "b", "boom"]
    messages = [p.get("message") for kind, p in seen if kind == "update_published"]
    assert messages == ["saw a", "saw b"]
    kind, dropped = seen[-1]
    assert kind == "updates_dropped" and (dropped["refused"], dropped["overLimit"]) == (3, 0)
    assert dropped["error"].startswith("parse_line raised KeyError:")
    assert "s3cret" not in dropped["error"]
