"""``delete RUN``: gc's rules and gc's removal, for the one run a person names."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pi_workflows.protocol.errors import ConflictError, ExitCode, NotFound
from pi_workflows.protocol.paths import Paths
from pi_workflows.protocol.store import Store
from pi_workflows.supervisor.maint.delete import delete_run
from pi_workflows.supervisor.maint.gc import collect_garbage

from tests.helpers.clocks import FakeClock
from tests.helpers.store import SOURCE, all_rows, put_in_state

pytestmark = pytest.mark.timeout(30)


def _paths(tmp_path: Path, store: Store) -> Paths:
    state = store.path.parent
    (tmp_path / "proj").mkdir(exist_ok=True)
    runs = state / "runs"
    runs.mkdir(mode=0o700, exist_ok=True)
    return Paths(tmp_path / "proj", tmp_path / "home", state, store.path, runs,
                 state / "host.lock", state / "logs")


def _bundle(paths: Paths, run_id: str, status: str = "completed") -> Path:
    path = paths.runs_dir / run_id
    (path / "session").mkdir(parents=True, mode=0o700)
    (path / "manifest.json").write_text(json.dumps({"runId": run_id}))
    (path / "state.json").write_text(json.dumps({"status": status}))
    (path / "trace.ndjson").write_text("")
    return path


def _done(store: Store, paths: Paths, run_id: str, status: str = "completed") -> Path:
    store.finish(run_id, put_in_state(store, run_id, "running"), status)
    return _bundle(paths, run_id, status)


def _rows(store: Store, run_id: str) -> int:
    return sum(run_id in map(str, row) for rows in all_rows(store.path).values() for row in rows)


def test_an_ended_run_goes_with_its_bundle_and_its_rows_in_every_table(
        store: Store, clock: FakeClock[int], tmp_path: Path) -> None:
    paths = _paths(tmp_path, store)
    gone, kept = _done(store, paths, "gone"), _done(store, paths, "kept")
    assert _rows(store, "gone") > 1  # its queue row and its events
    deleted = delete_run(store, paths, "gone", now=clock.now)
    assert [line.run_id for line in deleted.removed] == ["gone"]
    assert deleted.removed[0].has_bundle and deleted.removed[0].bytes > 0
    assert not gone.exists() and _rows(store, "gone") == 0
    assert kept.is_dir() and store.get("kept") is not None
    # Just settled is old enough: naming the run is the decision, not its age.
    assert sorted(os.listdir(paths.runs_dir / ".gc")) == ["lock", "trash"]  # journal cleared


@pytest.mark.parametrize("state", ["queued", "starting", "running", "parked"])
def test_a_run_that_has_not_ended_is_refused_and_kept(
        store: Store, clock: FakeClock[int], tmp_path: Path, state: str) -> None:
    paths = _paths(tmp_path, store)
    put_in_state(store, "open", state)
    with pytest.raises(ConflictError) as caught:
        delete_run(store, paths, "open", now=clock.now)
    assert caught.value.exit_code == ExitCode.USAGE
    assert caught.value.message.startswith(f"run open was not deleted: it is {state}; ")
    assert store.get("open") is not None


def test_a_run_waiting_at_a_checkpoint_and_a_run_in_a_chain_are_refused(
        store: Store, clock: FakeClock[int], tmp_path: Path) -> None:
    paths = _paths(tmp_path, store)
    waits = _done(store, paths, "waits", "waiting")
    with pytest.raises(ConflictError, match=r"waits at a checkpoint.*answer it or"):
        delete_run(store, paths, "waits", now=clock.now)
    assert waits.is_dir() and store.get("waits") is not None
    with pytest.raises(NotFound):
        delete_run(store, paths, "nothing-here", now=clock.now)


def test_a_run_linked_to_others_goes_only_with_its_whole_chain(
        store: Store, clock: FakeClock[int], tmp_path: Path) -> None:
    paths = _paths(tmp_path, store)
    parent = _done(store, paths, "parent", "waiting")
    store.enqueue_detached("child", SOURCE, "yes", parent_run_id="parent")
    token = store.claim_by_id("child", "runner-a").token
    store.mark_running("child", token)
    store.finish("child", token, "completed")
    child = _bundle(paths, "child")
    with pytest.raises(ConflictError, match=r"linked to 1 other run.*--chain` deletes all 2"):
        delete_run(store, paths, "child", now=clock.now)
    assert parent.is_dir() and child.is_dir() and store.get("child") is not None
    deleted = delete_run(store, paths, "child", now=clock.now, whole_chain=True)
    assert sorted(line.run_id for line in deleted.removed) == ["child", "parent"]
    assert not parent.exists() and not child.exists() and store.get("parent") is None


def test_delete_journals_as_gc_does_and_a_gc_finishes_a_crashed_one(
        store: Store, clock: FakeClock[int], tmp_path: Path) -> None:
    paths = _paths(tmp_path, store)
    bundle = _done(store, paths, "doomed")

    class Crash(Exception):
        pass

    def crash(at: str) -> None:
        if at == "deleted":  # its rows are gone, its bundle not yet
            journal = json.loads((paths.runs_dir / ".gc" / "journal.json").read_text())
            assert journal["runIds"] == ["doomed"]
            raise Crash(at)

    with pytest.raises(Crash):
        delete_run(store, paths, "doomed", now=clock.now, pause=crash)
    assert store.get("doomed") is None and (bundle / "manifest.json").is_file()
    report = collect_garbage(store, paths, older_than="30d", now=clock.now, dry_run=False)
    assert report.finished == ["doomed"] and not bundle.exists()
