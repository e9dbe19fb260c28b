"""The drill's scratch directory rules and its seeded plan, without running a drill."""

from __future__ import annotations

import json
import random
import stat
from pathlib import Path

import pytest
from pi_workflows.protocol.errors import UsageError
from pi_workflows.supervisor.drill.faults import KINDS, plan
from pi_workflows.supervisor.drill.scratch import MARKER, Scratch, claim_directory
from pi_workflows.supervisor.drill.workload import WORKFLOWS


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
    assert drawn == set(KINDS) - {"pi_kill9"}  # no Pi: no Pi child to kill


def test_every_workflow_file_defines_a_valid_workflow(tmp_path: Path) -> None:
    from pi_workflows.protocol.definitions.discovery import load_workflow_file

    for name, text in WORKFLOWS.items():
        path = tmp_path / f"{name}.workflow.py"
        path.write_text(text)
        assert load_workflow_file(path).name == name
