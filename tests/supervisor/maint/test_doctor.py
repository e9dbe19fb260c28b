"""``doctor``'s checks of a project's directories."""

from __future__ import annotations

from pathlib import Path

import pytest
from pi_workflows.protocol.paths import resolve_paths
from pi_workflows.protocol.settings import load_settings
from pi_workflows.supervisor.maint.doctor import check_permissions


def test_a_runs_path_that_is_a_file_is_named_not_a_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = tmp_path / "runs-file"
    runs.write_text("")
    runs.chmod(0o644)
    monkeypatch.setenv("PI_WORKFLOWS_RUNS_DIR", str(runs))
    paths = resolve_paths(load_settings(), tmp_path)
    paths.state_dir.mkdir(parents=True, mode=0o700)
    check = check_permissions(paths)
    assert check.level == "fail"
    assert f"{runs} (PI_WORKFLOWS_RUNS_DIR) is not a directory" in check.message
    assert "chmod" not in check.message  # a permission fix would not help


def test_no_host_names_the_host_command_of_the_project_checked(tmp_path: Path) -> None:
    from pi_workflows.supervisor.maint.doctor import check_host

    project = tmp_path / "app"
    project.mkdir()
    paths = resolve_paths(load_settings(), project)
    check = check_host(paths)  # this process's directory is not the project
    assert check.level == "info"
    assert f"`pi-workflows host --background --project {paths.project}`" in check.message
