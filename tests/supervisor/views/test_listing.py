"""``list``'s table: a header, columns sized to a width, the filters' window and paging."""

from __future__ import annotations

from pathlib import Path

import pytest
from pi_workflows.protocol.store import Store
from pi_workflows.supervisor.views.listing import HEADER, empty_line, listing_lines, select

from tests.helpers.clocks import FakeClock
from tests.helpers.store import put_in_state

pytestmark = pytest.mark.timeout(30)

RUN = "20261201T083022Z-review-99624cea"


def _info(run_id: str, *, error: str | None = None) -> dict[str, object]:
    return {"runId": run_id, "workflow": "review", "queueState": "failed", "runStatus": "failed",
            "createdAt": 0, "parentRunId": None, "continuedBy": None, "startedAt": 0,
            "finishedAt": 2500, "errorCode": "step_failed" if error else None, "error": error}


def test_the_table_has_a_header_and_aligned_columns() -> None:
    lines = listing_lines([_info(RUN), _info("short", error="boom")], now_ms=180_000)
    assert lines[0].split() == list(HEADER)
    # Each column starts where its header does.
    for name in ("WORKFLOW", "STATE", "CREATED", "DURATION"):
        at = lines[0].index(name)
        assert all(line[at - 2:at] == "  " and line[at] != " " for line in lines[1:]), name
    assert lines[2].endswith("[step_failed] boom")


def test_rows_use_the_whole_width_and_only_the_detail_is_cut() -> None:
    long = "x" * 300
    infos = [_info(RUN, error=long)]
    wide = listing_lines(infos, now_ms=180_000, width=200)
    assert len(wide[1]) == 200 and wide[1].endswith("…")  # not wrapped or cut at 80
    narrow = listing_lines(infos, now_ms=180_000, width=40)
    assert narrow[1].startswith(RUN)  # the id stays whole even past the width
    assert narrow[1].endswith("  [step_failed] xxxxx…")  # cut to 20, never to a stub
    assert listing_lines([_info(RUN, error="short")], 180_000, width=200)[1].endswith("short")


def test_an_empty_listing_names_the_filters() -> None:
    assert empty_line(["--since 1h", "--state waiting"]) == (
        "no runs match (--since 1h, --state waiting)")
    assert empty_line([]).startswith("no runs in this project yet")


def test_until_and_offset_page_through_the_window(
        store: Store, clock: FakeClock[int], tmp_path: Path) -> None:
    first = clock.now
    for run_id in ("r1", "r2", "r3", "r4"):
        put_in_state(store, run_id, "queued" if run_id != "r3" else "cancelled")
        clock.advance(60_000)
    runs = tmp_path / "runs"

    def ids(**kw: object) -> list[str]:
        return [i["runId"] for i in select(store, runs, **kw)]  # type: ignore[arg-type]

    assert ids(until_ms=first + 60_000) == ["r2", "r1"]
    assert ids(since_ms=first + 60_000, until_ms=first + 120_000) == ["r3", "r2"]
    assert ids(offset=1, limit=2) == ["r3", "r2"]
    assert ids(offset=4) == []
    # With a state filter the offset counts matching runs only.
    assert ids(state="queued", offset=1) == ["r2", "r1"]
    assert ids(state="queued", offset=1, limit=1) == ["r2"]
