"""The peer bench's schedule alternates the sides and its spreads and ratios are right."""

from __future__ import annotations

import math

import pytest

from bench.peers_stats import (
    fmt_spread,
    interleave,
    median_ratio,
    paired_ratios,
    ratio,
    schedule,
    spread,
)

pytestmark = pytest.mark.timeout(10)


def test_the_sides_alternate_in_every_round() -> None:
    assert interleave(["d-wal", "d-def"], ["pi-2", "pi-4"]) == ["d-wal", "pi-2", "d-def", "pi-4"]
    assert interleave(["d"], ["pi-2", "pi-4"]) == ["d", "pi-2", "pi-4"]
    assert interleave([], ["pi"]) == ["pi"]  # DBOS missing: the pi-workflows side alone
    assert schedule(["a"], ["b"], 3) == [(0, "a"), (0, "b"), (1, "a"), (1, "b"),
                                         (2, "a"), (2, "b")]


def test_spread_skips_missing_figures_and_ratios_pair_rounds() -> None:
    assert spread([3.0, math.nan, 1.0, 2.0]) == (1.0, 2.0, 3.0)
    assert all(math.isnan(v) for v in spread([math.nan]))
    assert fmt_spread([]) == "no samples"
    assert fmt_spread([1.0, 3.0], "s", 1) == "min 1.0  median 2.0  max 3.0 s  (n=2)"
    assert math.isnan(ratio(1.0, 0.0)) and math.isnan(ratio(math.nan, 1.0))
    # Round 1 of y is missing and round 2's x is NaN: only round 0 pairs.
    assert paired_ratios({0: 6.0, 1: 5.0, 2: math.nan}, {0: 3.0, 2: 4.0}) == [2.0]
    assert median_ratio([6.0, 8.0, 10.0], [4.0, 4.0]) == 2.0


def test_without_dbos_the_bench_says_how_to_install_it_and_exits_0(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from bench import peers_bench, peers_dbos

    monkeypatch.setattr(peers_dbos, "available", lambda: False)
    assert peers_bench.main(["--skip", "throughput,latency,recovery"]) == 0
    out = capsys.readouterr().out
    assert "pip install -e '.[bench]'" in out and "no DBOS" in out
    assert "dbos" not in sys.modules  # the bench process never imports it
