"""Eight real processes race for the queue on one store (each backend)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from pi_workflows.protocol.store import Store

from tests.helpers import children, processes
from tests.helpers.store import SOURCE, where_of

pytestmark = pytest.mark.slow  # races of eight real processes

PROCS = 8
ROWS = 200


def _fill(store: Store, rows: int) -> list[str]:
    ids = [f"run-{i:04d}" for i in range(rows)]
    for run_id in ids:
        store.enqueue_detached(run_id, SOURCE, {"n": run_id})
    return ids


@pytest.mark.timeout(60)
def test_every_row_is_claimed_exactly_once(tmp_path: Path, store: Store) -> None:
    path = where_of(store)
    ids = _fill(store, ROWS)
    barrier = processes.CTX.Barrier(PROCS + 1)
    outs = [tmp_path / f"claims-{i}.json" for i in range(PROCS)]
    procs = [processes.start(children.race_claims, path, f"runner-{i}", barrier, str(outs[i]))
             for i in range(PROCS)]
    barrier.wait(timeout=50)
    processes.join_all(procs)

    claimed = [tuple(pair) for out in outs for pair in json.loads(out.read_text())]
    counts = Counter(run_id for run_id, _ in claimed)
    assert sorted(counts) == ids
    assert set(counts.values()) == {1}
    for run_id, token in claimed:
        row = store.get(run_id)
        assert row is not None and row.state == "starting" and row.claim_token == token
    starts = Counter(e.run_id for e in store.events_since(0, limit=10_000)
                     if e.type == "starting")
    assert set(starts.values()) == {1} and len(starts) == ROWS


@pytest.mark.timeout(60)
def test_expiring_leases_never_give_a_row_two_live_owners(tmp_path: Path,
                                                          store: Store) -> None:
    """Leases of 50 ms expire mid-race; owners only write through the fence.

    If a stale owner could still write, its token would reappear in a run's
    log after the next owner's lines, or a run would be finished twice.
    """
    path = where_of(store)
    runs = tmp_path / "runs"
    ids = _fill(store, ROWS)
    barrier = processes.CTX.Barrier(PROCS + 1)
    outs = [tmp_path / f"owners-{i}.json" for i in range(PROCS)]
    procs = [processes.start(children.race_short_leases, path, str(runs), f"runner-{i}",
                          barrier, str(outs[i]), ROWS, 50, 45.0)
             for i in range(PROCS)]
    barrier.wait(timeout=50)
    processes.join_all(procs, timeout_s=55)

    results = [json.loads(out.read_text()) for out in outs]
    finished = [tuple(pair) for r in results for pair in r["finished"]]
    assert Counter(run_id for run_id, _ in finished) == Counter(ids)  # each exactly once
    assert sum(r["lost"] for r in results) > 0  # stalled owners lost their claims

    for run_id, token in finished:
        lines = (runs / run_id / "log").read_text().splitlines()
        owners = [line.split()[0] for line in lines]
        # Ownership is a sequence of blocks: once a newer owner wrote, an older never does.
        blocks = [t for i, t in enumerate(owners) if i == 0 or owners[i - 1] != t]
        assert len(blocks) == len(set(blocks)), (run_id, lines)
        assert lines[-1] == f"{token} finish"  # the finisher wrote last

    assert {r.run_id for r in store.list_runs("done", limit=ROWS + 1)} == set(ids)
    feed = store.events_since(0, limit=100_000)
    assert Counter(e.run_id for e in feed if e.type == "done") == Counter(ids)
    assert any(e.type == "claim_taken_over" for e in feed)  # leases did expire mid-race
