"""A running node's Watch on a fake monotonic clock: timeout, cancel, park grace."""

from __future__ import annotations

import threading

import pytest
from pi_workflows.worker.control import Control
from pi_workflows.worker.nodes import Watch

from tests.helpers.clocks import FakeClock


def _watch(timeout_s: float | None, *, effectful: bool = False,
           park_grace_s: float = 5.0) -> tuple[Watch, Control, FakeClock[float], threading.Event]:
    control, ticks, stop = Control(), FakeClock(50.0), threading.Event()
    watch = Watch(control, stop, timeout_s, effectful=effectful, park_grace_s=park_grace_s,
                  monotonic=ticks)
    return watch, control, ticks, stop


@pytest.mark.timeout(10)
def test_the_deadline_is_the_timeout_after_the_start() -> None:
    watch, _, ticks, stop = _watch(3.0)
    ticks.now += 2.999
    assert watch.check() is None and not stop.is_set()
    ticks.now += 0.001
    assert watch.check() == "timed_out" and stop.is_set()
    assert watch.check() == "timed_out"  # decided once, for good


@pytest.mark.timeout(10)
def test_no_timeout_never_times_out_and_cancel_stops_at_once() -> None:
    watch, control, ticks, stop = _watch(None, effectful=True)
    ticks.now += 1e9
    assert watch.check() is None
    control.request_cancel()
    assert watch.check() == "cancelled" and stop.is_set()  # an effect gets no grace on cancel


@pytest.mark.timeout(10)
def test_a_park_stops_a_plain_node_at_once() -> None:
    watch, control, _, stop = _watch(60.0)
    control.request_park()
    assert watch.check() == "cancelled" and stop.is_set()


@pytest.mark.timeout(10)
def test_a_park_lets_an_effect_finish_within_the_park_grace() -> None:
    watch, control, ticks, stop = _watch(60.0, effectful=True, park_grace_s=5.0)
    ticks.now += 10
    control.request_park()
    assert watch.check() is None  # the grace starts when the park is first seen
    ticks.now += 4.9
    assert watch.check() is None and not stop.is_set()
    ticks.now += 0.1
    assert watch.check() == "cancelled" and stop.is_set()
