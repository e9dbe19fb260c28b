"""A repeated warning is said once per interval per key, with a count of the rest."""

from __future__ import annotations

import pytest
from pi_workflows.protocol.throttle import Throttle, held_note

from tests.helpers.clocks import FakeClock

pytestmark = pytest.mark.timeout(10)


def test_the_first_is_said_then_one_per_interval_with_the_count_held_back() -> None:
    clock = FakeClock(100.0)
    throttle = Throttle(60.0, monotonic=clock)
    assert throttle.due("disk_full") == 0
    assert [throttle.due("disk_full") for _ in range(500)] == [None] * 500
    assert throttle.due("store_busy") == 0  # another key has its own pace
    clock.advance(59.9)
    assert throttle.due("disk_full") is None
    clock.advance(0.2)
    assert throttle.due("disk_full") == 501
    assert held_note(501) == " (501 more like it in the last minute)" and held_note(0) == ""
