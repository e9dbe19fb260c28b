"""The drill's scratch directory rules and its seeded plan, without running a drill."""

from __future__ import annotations

import json
import os
import random
import stat
from pathlib import Path

import pytest
from pi_workflows.protocol.errors import UsageError
from pi_workflows.supervisor.drill import scratch as scratch_module
from pi_workflows.supervisor.drill.faults import (
    KINDS,
    MOMENTS,
    NEEDS_MOUNT,
    NEEDS_PI,
    Injector,
    Planned,
    moment_of,
    plan,
)
from pi_workflows.supervisor.drill.hosts import Hosts
from pi_workflows.supervisor.drill.scratch import (
    KEPT_RUNS,
    MARKER,
    RUNS_DISK,
    Scratch,
    claim_directory,
)
from pi_workflows.supervisor.drill.smalldisk import mount_tmpfs, unmount
from pi_workflows.supervisor.drill.workload import WORKFLOWS, Launcher


def test_a_new_directory_is_claimed_private_with_the_marker(tmp_path: Path) -> None:
    scratch = Scratch.create(tmp_path / "d", 5)
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o700
    marker = tmp_path / "d" / MARKER
    assert stat.S_IMODE(marker.stat().st_mode) == 0o600
    assert json.loads(marker.read_text()) == {"createdBy": "pi-workflows drill", "seed": 5}
    # The store and the bundles are the drill's too, and no caller setting leaks in.
    assert scratch.paths.store_file.is_relative_to(tmp_path / "d")
    assert scratch.env["PI_WORKFLOWS_LEASE_MS"] == "2000"


def test_someone_elses_files_are_refused_and_a_former_drills_are_emptied(
        tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "src").mkdir()
    with pytest.raises(UsageError, match=r"holds files the drill did not create \(src\)"):
        claim_directory(mine, 1)
    assert [p.name for p in mine.iterdir()] == ["src"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="is not a directory"):
        claim_directory(tmp_path / "file", 1)
    old = tmp_path / "old"
    Scratch.create(old, 1)
    (old / "ledger.txt").write_text("left over\n")
    (old / ".home" / "x").mkdir()
    claim_directory(old, 2)
    assert sorted(p.name for p in old.iterdir()) == [MARKER]


@pytest.mark.timeout(30)
def test_a_project_that_is_a_link_is_refused_and_its_target_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o755)
    target.chmod(0o755)
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(UsageError, match="symbolic link"):
        claim_directory(link, 1)
    assert stat.S_IMODE(target.stat().st_mode) == 0o755 and not any(target.iterdir())


def test_the_seed_fixes_the_faults_it_asks_for() -> None:
    one, two = random.Random(42), random.Random(42)
    assert [plan(one, agents=True) for _ in range(20)] == \
        [plan(two, agents=True) for _ in range(20)]
    rng = random.Random(3)
    drawn = {f.kind for _ in range(300) for f in plan(rng, agents=False)}
    assert drawn == set(KINDS) - NEEDS_PI  # no Pi: no Pi child, no Pi session to kill


def test_forced_kinds_are_the_only_ones_drawn_and_unmountable_ones_are_left_out() -> None:
    rng = random.Random(5)
    forced = {f.kind for _ in range(50)
              for f in plan(rng, agents=True, only=frozenset({"runs_disk_full"}))}
    assert forced == {"runs_disk_full"}
    left_out = {f.kind for _ in range(300) for f in plan(rng, agents=True, without=NEEDS_MOUNT)}
    assert "runs_disk_full" not in left_out and len(left_out) > 5
    # Forced on a machine that cannot mount: still drawn, then skipped with its reason.
    both = {f.kind for _ in range(20) for f in plan(rng, agents=True, without=NEEDS_MOUNT,
                                                   only=frozenset({"runs_disk_full"}))}
    assert both == {"runs_disk_full"}


def test_without_a_tmpfs_the_runs_stay_put_and_the_fault_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scratch_module, "mount_tmpfs",
                        lambda mount, size: f"cannot mount a tmpfs at {mount}: permission denied")
    scratch = Scratch.create(tmp_path / "d", 1, small_runs=True)
    assert scratch.runs_disk is None and "permission denied" in str(scratch.small_runs_skipped)
    assert "PI_WORKFLOWS_RUNS_DIR" not in scratch.env
    assert scratch.paths.runs_dir == scratch.paths.state_dir / "runs"
    injector = Injector(scratch, Hosts(scratch), Launcher(scratch))
    injector.run(0, [Planned("runs_disk_full", 0.0, 0.0, 1.0)])
    [fault] = injector.injected
    assert fault["applied"] is False and "permission denied" in fault["note"]


@pytest.mark.timeout(60)
def test_the_runs_tmpfs_is_mounted_filled_freed_and_unmounted(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    if (why := mount_tmpfs(probe, 1024 * 1024)) is not None:
        pytest.skip(why)
    unmount(probe)
    scratch = Scratch.create(tmp_path / "d", 1, small_runs=True)
    disk = scratch.root / RUNS_DISK
    try:
        assert scratch.runs_disk == disk and os.path.ismount(disk)
        assert scratch.env["PI_WORKFLOWS_RUNS_DIR"] == str(disk / "runs")
        assert scratch.paths.runs_dir == disk / "runs"
        (disk / "runs" / "r1").mkdir(parents=True)
        (disk / "runs" / "r1" / "state.json").write_text("{}")
        injector = Injector(scratch, Hosts(scratch), Launcher(scratch))
        injector.run(0, [Planned("runs_disk_full", 0.0, 0.0, -1.9)])  # full 0.1 s
        [fault] = injector.injected
        assert fault["applied"] is True and "KiB filled" in fault["note"], fault
        assert not (disk / "filler").exists()
        scratch.release()  # the bundles are copied out, as evidence, then it goes
        assert not os.path.ismount(disk)
        assert (scratch.root / KEPT_RUNS / "r1" / "state.json").read_text() == "{}"
        # A drill killed before it unmounted: the next one there unmounts first
        # (emptying a mount point would fail), then mounts its own.
        assert mount_tmpfs(disk, 1024 * 1024) is None
        (disk / "old").write_text("x")
        again = Scratch.create(tmp_path / "d", 2, small_runs=True)
        assert os.path.ismount(disk) and not (disk / "old").exists()
        again.release()
        assert not os.path.ismount(disk)
    finally:
        unmount(disk)


def test_every_workflow_file_defines_a_valid_workflow(tmp_path: Path) -> None:
    from pi_workflows.protocol.definitions.discovery import load_workflow_file

    for name, text in WORKFLOWS.items():
        path = tmp_path / f"{name}.workflow.py"
        path.write_text(text)
        assert load_workflow_file(path).name == name


def test_a_pi_session_kill_aims_at_every_phase_of_an_in_session_step() -> None:
    """``pick`` spreads the kill over the step: Pi starting, the run queued, the step
    message in (the model mid-response), the submit (or cancel) begun, the deferred turn
    after a cancel delivered; each within its window."""
    windows = {phase: window for phase, _, window in MOMENTS}
    rng = random.Random(9)
    aimed = [moment_of(rng.random()) for _ in range(400)]
    assert {phase for phase, _ in aimed} == {"opening", "launched", "step", "submitted", "turn"}
    assert all(0 <= offset <= windows[phase] for phase, offset in aimed)
    assert moment_of(0.0) == ("opening", 0.0) and moment_of(0.75)[0] == "submitted"
    assert moment_of(0.99)[0] == "turn"
