"""``stream.watch.Watch``: a change after a quiet spell is reported at once, a burst at
most once per coalescing window, and nothing is reported when nothing moved."""

from __future__ import annotations

from pathlib import Path

import pytest
from pi_workflows.supervisor.views.stream.watch import COALESCE_S, Watch

pytestmark = pytest.mark.timeout(30)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []
        self.on_sleep: list[Path] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        if self.on_sleep:  # a write lands while the watcher sleeps
            with open(self.on_sleep.pop(), "a") as fh:
                fh.write("x")


def test_quiet_then_change_is_at_once_and_a_burst_is_held_to_the_window(
        tmp_path: Path) -> None:
    f = tmp_path / "trace.ndjson"
    f.write_text("")
    clock, version = Clock(), [0]
    watch = Watch(lambda: [f], lambda: version[0], monotonic=clock.monotonic,
                  sleep=clock.sleep)
    assert watch.wait(0.1) is False  # nothing moved
    f.write_text("a")
    clock.slept.clear()
    assert watch.wait(1.0) is True
    assert clock.slept == []  # seen on the first look: no wait at all
    f.write_text("ab")  # a second write right after: inside the window
    began = clock.now
    assert watch.wait(1.0) is True
    assert clock.now - began == pytest.approx(COALESCE_S)
    version[0] = 7  # the store moved: a change too
    clock.now += 1
    assert watch.wait(1.0) is True


def test_a_write_during_the_hold_is_taken_with_it_not_reported_again(tmp_path: Path) -> None:
    f, g = tmp_path / "a", tmp_path / "b"
    f.write_text("")
    g.write_text("")
    clock = Clock()
    watch = Watch(lambda: [f, g], lambda: 0, monotonic=clock.monotonic, sleep=clock.sleep)
    f.write_text("1")
    assert watch.wait(1.0)
    f.write_text("12")
    clock.on_sleep.append(g)  # lands during the hold
    assert watch.wait(1.0)
    assert watch.wait(0.05) is False  # g's write was part of the last report


def test_a_file_that_appears_or_goes_is_a_change(tmp_path: Path) -> None:
    f = tmp_path / "later"
    clock = Clock()
    watch = Watch(lambda: [f], lambda: 0, monotonic=clock.monotonic, sleep=clock.sleep)
    f.write_text("")
    assert watch.wait(1.0)
    clock.now += 1
    f.unlink()
    assert watch.wait(1.0)


def test_a_slow_rebuild_spaces_the_next_report_out(tmp_path: Path) -> None:
    from pi_workflows.supervisor.views.stream.subscribe import Subscription
    f = tmp_path / "f"
    f.write_text("")
    builds = [0]

    def build() -> dict[str, object]:
        builds[0] += 1
        import time
        time.sleep(0.04)  # a rebuild of a busy project: the cost being bounded, not a wait
        return {"at": builds[0], "n": f.read_text()}

    sub = Subscription(build, lambda: [f])
    f.write_text("1")
    assert sub.next(2.0) is not None
    assert sub._watch.gap >= 0.08  # twice the build: rebuilding at most a third of the time
