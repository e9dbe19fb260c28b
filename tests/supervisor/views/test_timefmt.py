"""Readable times and typed durations: pure functions."""

from __future__ import annotations

import pytest
from pi_workflows.protocol.errors import UsageError
from pi_workflows.supervisor.views.timefmt import ago, duration, parse_duration

pytestmark = pytest.mark.timeout(10)

NOW = 1_800_000_000_000


@pytest.mark.parametrize(("ms", "text"), [
    (0, "0 ms"), (850, "850 ms"), (999, "999 ms"), (1000, "1.0 s"), (12_345, "12.3 s"),
    (59_949, "59.9 s"), (60_000, "1 min 00 s"), (245_000, "4 min 05 s"),
    (3_600_000, "1 h 00 min"), (7_620_000, "2 h 07 min"), (273_600_000, "3 d 4 h"),
    (-5, "0 ms"),
])
def test_durations_read_in_the_largest_sensible_unit(ms: int, text: str) -> None:
    assert duration(ms) == text


@pytest.mark.parametrize(("seconds_before", "text"), [
    (0, "just now"), (9, "just now"), (-30, "just now"), (10, "10 s ago"), (59, "59 s ago"),
    (60, "1 min ago"), (150, "2 min ago"), (3599, "59 min ago"), (3600, "1 h ago"),
    (86_399, "23 h ago"), (86_400, "1 d ago"), (30 * 86_400, "30 d ago"),
])
def test_ago_rounds_down_to_whole_units(seconds_before: int, text: str) -> None:
    assert ago(NOW - seconds_before * 1000, NOW) == text


@pytest.mark.parametrize(("text", "seconds"), [
    ("30s", 30), ("30m", 1800), ("2h", 7200), ("7d", 604_800), ("1w", 604_800),
    ("1h30m", 5400), ("1.5h", 5400), (" 2h ", 7200),
])
def test_durations_parse_with_units(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "30", "m", "2x", "1h 30", "-2h", "h2", "2hours", "2M", "2H"])
def test_a_bad_duration_is_one_usage_error_naming_the_option(bad: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_duration(bad, "--since")
    assert caught.value.exit_code == 2 and caught.value.code == "invalid_duration"
    assert caught.value.message.startswith("--since ") and "such as 30m" in caught.value.message


def test_an_upper_case_unit_is_refused_not_read_as_another() -> None:
    # 2M would be two minutes to the parser and two months to a person.
    with pytest.raises(UsageError, match="units are lower case"):
        parse_duration("2M", "--older-than")
