"""gc's own rules: durations, what on disk it may delete, and finishing after a crash."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pi_workflows.protocol.errors import ExitCode, UsageError
from pi_workflows.protocol.paths import Paths, project_key
from pi_workflows.protocol.store import Store
from pi_workflows.protocol.wire import MARKER_ENV, marker_value
from pi_workflows.supervisor.maint.gc import Report, collect_garbage, parse_duration

from tests.helpers.clocks import FakeClock
from tests.helpers.processes import reap
from tests.helpers.store import all_rows, put_in_state

pytestmark = pytest.mark.timeout(30)
DAY = 86_400_000


@pytest.mark.parametrize(("text", "ms"), [
    ("30d", 30 * DAY), ("12h", 12 * 3_600_000), ("90m", 90 * 60_000), ("45s", 45_000),
    ("2w", 14 * DAY), ("1d12h", 36 * 3_600_000), ("1.5h", 90 * 60_000),
    ("1s", 1000),  # the same syntax as `list --since`
])
def test_durations(text: str, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize("text", ["", "30", "d", "-1d", "30dd", "10y", "1234567890d", "３０d",
                                  "0s", "0d0h", "30D", "2M"])
def test_any_other_duration_is_one_usage_error(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_duration(text)
    assert caught.value.exit_code == ExitCode.USAGE
    assert caught.value.message.startswith("--older-than ")


def _paths(tmp_path: Path, store: Store) -> Paths:
    state = store.path.parent
    project = tmp_path / "proj"
    project.mkdir(exist_ok=True)
    runs = state / "runs"
    runs.mkdir(mode=0o700, exist_ok=True)
    return Paths(project, tmp_path / "home", state, store.path, runs, state / "host.lock",
                 state / "logs")


def _bundle(paths: Paths, run_id: str, status: str = "completed", **extra: str) -> Path:
    path = paths.runs_dir / run_id
    (path / "session").mkdir(parents=True, mode=0o700)
    (path / "manifest.json").write_text(json.dumps({"runId": run_id}))
    (path / "state.json").write_text(json.dumps({"status": status}))
    (path / "trace.ndjson").write_text("")
    for name, text in extra.items():
        (path / name).write_text(text)
    return path


def _done(store: Store, paths: Paths, run_id: str) -> Path:
    store.finish(run_id, put_in_state(store, run_id, "running"), "completed")
    return _bundle(paths, run_id)


def _gc(store: Store, paths: Paths, clock: FakeClock[int], *, dry_run: bool = False,
        pause: Callable[[str], None] = lambda at: None) -> Report:
    return collect_garbage(store, paths, older_than="1d", now=clock.now + 2 * DAY,
                           dry_run=dry_run, pause=pause)


def _listing(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.lstat().st_size) for p in root.rglob("*"))


def test_dry_run_changes_nothing_and_names_what_would_go(
        store: Store, clock: FakeClock[int], tmp_path: Path) -> None:
    paths = _paths(tmp_path, store)
    _done(store, paths, "a")
    put_in_state(store, "q", "queued")
    rows, files = all_rows(store.path), _listing(paths.state_dir)
    report = _gc(store, paths, clock, dry_run=True)
    assert [r.run_id for r in report.removed] == ["a"]
    assert report.removed[0].has_bundle and report.removed[0].bytes > 0
    assert all_rows(store.path) == rows and _listing(paths.state_dir) == files


def test_only_real_bundle_directories_are_deleted_and_links_are_not_followed(
        store: Store, clock: FakeClock[int], tmp_path: Path) -> None:
    paths = _paths(tmp_path, store)
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    # A bundle with a link inside goes; what it points to stays.
    linked = _done(store, paths, "linked")
    (linked / "session" / "out").symlink_to(outside)
    # The run id names a symlink out of the runs dir: kept, and the target untouched.
    store.finish("aslink", put_in_state(store, "aslink", "running"), "completed")
    (paths.runs_dir / "aslink").symlink_to(outside)
    # A manifest that names another run: kept.
    store.finish("forged", put_in_state(store, "forged", "running"), "completed")
    _bundle(paths, "forged").joinpath("manifest.json").write_text('{"runId": "other"}')
    # No manifest but only bundle files (creation stopped early): goes.
    store.fail("partial", put_in_state(store, "partial", "starting"), "activation_failed", "x")
    (paths.runs_dir / "partial" / "artifacts").mkdir(parents=True)
    (paths.runs_dir / "partial" / ".bundle.lock").write_text("")
    # No manifest and something foreign in it: kept.
    store.fail("foreign", put_in_state(store, "foreign", "starting"), "activation_failed", "x")
    (paths.runs_dir / "foreign").mkdir()
    (paths.runs_dir / "foreign" / "notes.txt").write_text("someone's")
    report = _gc(store, paths, clock)
    assert sorted(r.run_id for r in report.removed) == ["linked", "partial"]
    assert {k.run_id: k.reason for k in report.kept} == {
        "aslink": "unsafe", "forged": "unsafe", "foreign": "unsafe"}
    assert (outside / "keep.txt").read_text() == "mine"
    assert not linked.exists() and not (paths.runs_dir / "partial").exists()
    assert (paths.runs_dir / "aslink").is_symlink() and (paths.runs_dir / "foreign").is_dir()
    assert store.get("aslink") is not None and store.get("linked") is None


def test_a_bundle_locked_by_a_writer_or_waiting_in_its_bundle_stays(
        store: Store, clock: FakeClock[int], tmp_path: Path) -> None:
    paths = _paths(tmp_path, store)
    locked = _done(store, paths, "locked")
    (locked / ".bundle.lock").write_text("")
    fd = os.open(locked / ".bundle.lock", os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another open file: as a writer in another process
    # The store says completed, the bundle says waiting: the bundle is not ignored.
    store.finish("waits", put_in_state(store, "waits", "running"), "completed")
    _bundle(paths, "waits", status="waiting")
    try:
        report = _gc(store, paths, clock)
    finally:
        os.close(fd)
    assert report.removed == []
    assert {k.run_id: k.reason for k in report.kept} == {
        "locked": "in_use", "waits": "waiting"}
    assert store.get("locked") is not None and locked.is_dir()
    assert [r.run_id for r in _gc(store, paths, clock).removed] == ["locked"]


class Crash(Exception):
    pass


@pytest.mark.parametrize("point", ["journaled", "deleted", "trashed"])
def test_a_rerun_finishes_what_a_crashed_gc_left(
        store: Store, clock: FakeClock[int], tmp_path: Path, point: str) -> None:
    paths = _paths(tmp_path, store)
    bundles = [_done(store, paths, rid) for rid in ("a", "b")]

    def crash(at: str) -> None:
        if at == point:
            raise Crash(at)

    with pytest.raises(Crash):
        _gc(store, paths, clock, pause=crash)
    a_row = store.get("a")
    if point == "journaled":
        assert a_row is not None and bundles[0].is_dir()
    elif point == "deleted":  # the rows went first; the bundle is still whole
        assert a_row is None and (bundles[0] / "manifest.json").is_file()
    else:
        assert a_row is None and not bundles[0].exists()
        assert os.listdir(paths.runs_dir / ".gc" / "trash")
    assert store.get("b") is not None and bundles[1].is_dir()  # the next chain was not reached
    report = _gc(store, paths, clock)
    assert report.finished == (["a"] if point == "deleted" else [])
    assert all(not b.exists() for b in bundles)
    assert store.get("a") is None and store.get("b") is None
    assert sorted(os.listdir(paths.runs_dir)) == [".gc"]
    assert sorted(os.listdir(paths.runs_dir / ".gc")) == ["lock", "trash"]
    assert os.listdir(paths.runs_dir / ".gc" / "trash") == []


def test_a_bundle_without_a_row_that_gc_did_not_journal_is_never_touched(
        store: Store, clock: FakeClock[int], tmp_path: Path) -> None:
    paths = _paths(tmp_path, store)
    orphan = _bundle(paths, "from-an-old-store")  # e.g. the store was reset
    _done(store, paths, "a")
    report = _gc(store, paths, clock)
    assert [r.run_id for r in report.removed] == ["a"]
    assert orphan.is_dir()


def test_a_run_a_live_process_uses_stays(
        store: Store, clock: FakeClock[int], tmp_path: Path) -> None:
    paths = _paths(tmp_path, store)
    chatted = _done(store, paths, "chatted")  # an interactive Pi on its conversation
    _done(store, paths, "worked")  # a worker (or its agent) that has not exited yet
    _done(store, paths, "free")
    sleeper = [sys.executable, "-c", "import sys, time; print(1, flush=True); time.sleep(60)"]
    marker = marker_value(project_key(paths.project), "runner-x", "worked")
    procs = [subprocess.Popen([*sleeper, "--session", str(chatted / "session" / "pi.jsonl")],
                              stdout=subprocess.PIPE),
             subprocess.Popen(sleeper, stdout=subprocess.PIPE, env={**os.environ,
                                                                    MARKER_ENV: marker})]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline()  # it is up
        report = _gc(store, paths, clock)
    finally:
        reap(*procs)
    assert [r.run_id for r in report.removed] == ["free"]
    assert {k.run_id: k.reason for k in report.kept} == {"chatted": "in_use", "worked": "in_use"}
    assert sorted(r.run_id for r in _gc(store, paths, clock).removed) == ["chatted", "worked"]


def test_a_wait_closed_by_cancel_goes_and_reads_cancelled(
        store: Store, clock: FakeClock[int], tmp_path: Path) -> None:
    paths = _paths(tmp_path, store)
    store.finish("closed", put_in_state(store, "closed", "running"), "waiting")
    _bundle(paths, "closed", status="waiting")  # the bundle keeps its waiting record
    store.close_wait("closed")
    report = _gc(store, paths, clock)
    assert [(r.run_id, r.state) for r in report.removed] == [("closed", "cancelled")]
    assert store.get("closed") is None and not (paths.runs_dir / "closed").exists()


def test_a_deleted_resources_events_go_once_past_the_cutoff_and_a_live_ones_stay(
        store: Store, clock: FakeClock[int], tmp_path: Path) -> None:
    paths = _paths(tmp_path, store)
    for key in ("gone", "live", "again"):
        store.apply_spec("files", key, {})
    store.request_delete("files", "gone")  # no finalizer: the row goes at once
    store.request_delete("files", "again")
    store.apply_spec("files", "again", {"n": 2})  # applied again: its history is its own
    clock.advance(DAY)
    store.apply_spec("files", "recent", {})
    store.request_delete("files", "recent")  # deleted, but its events are newer than the cutoff
    clock.now -= DAY  # _gc looks 2 days past the clock: cutoff = clock + 1 day
    rows = all_rows(store.path)
    gone_events = len(store.resource_events("files", "gone"))
    assert gone_events >= 2
    assert _gc(store, paths, clock, dry_run=True).controller_events == gone_events
    assert all_rows(store.path) == rows  # a dry run counts only
    report = _gc(store, paths, clock)
    assert report.controller_events == gone_events
    assert report.as_json()["controllerEventsRemoved"] == gone_events
    assert store.resource_events("files", "gone") == []
    for key in ("live", "again", "recent"):
        assert store.resource_events("files", key), key
    assert _gc(store, paths, clock).controller_events == 0
