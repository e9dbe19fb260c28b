"""Settings, per-project paths, private directories and the log file."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from pi_workflows.protocol.errors import UsageError
from pi_workflows.protocol.logsetup import LOG_FILE, setup_logging
from pi_workflows.protocol.settings import (
    ensure_private_dir,
    load_settings,
    project_key,
    resolve_paths,
)

from tests.helpers.cli import run_cli


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_state_dir_is_keyed_by_the_projects_real_path(tmp_path: Path) -> None:
    project = tmp_path / "my app"
    project.mkdir()
    link = tmp_path / "link"
    link.symlink_to(project)
    settings = load_settings()
    direct, via_link = resolve_paths(settings, project), resolve_paths(settings, link)
    assert direct == via_link
    assert direct.state_dir.parent == settings.home.expanduser() / "projects"
    assert direct.state_dir.name == project_key(project)
    assert direct.state_dir.name.startswith("my-app-")
    other = tmp_path / "other"
    other.mkdir()
    assert resolve_paths(settings, other).state_dir != direct.state_dir
    assert direct.store_file == direct.state_dir / "store.sqlite3"
    assert direct.runs_dir == direct.state_dir / "runs"


@pytest.mark.parametrize(("env", "field"), [
    ("PI_WORKFLOWS_STORE_FILE", "store_file"), ("PI_WORKFLOWS_RUNS_DIR", "runs_dir"),
    ("PI_WORKFLOWS_HOST_LOCK", "host_lock"), ("PI_WORKFLOWS_LOG_DIR", "log_dir"),
    ("PI_WORKFLOWS_STATE_DIR", "state_dir"),
])
def test_each_path_can_be_overridden_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           env: str, field: str) -> None:
    before = resolve_paths(load_settings(), tmp_path)
    target = tmp_path / "elsewhere" / "x"
    monkeypatch.setenv(env, str(target))
    after = resolve_paths(load_settings(), tmp_path)
    assert getattr(after, field) == target
    for other in ("store_file", "runs_dir", "host_lock", "log_dir"):
        if other != field and field != "state_dir":
            assert getattr(after, other) == getattr(before, other)


def test_config_file_applies_below_the_environment(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text('lease_ms = 1234\nrenew_ms = 400\nfsync = "always"\n')
    monkeypatch.setenv("PI_WORKFLOWS_CONFIG", str(config))
    assert load_settings().lease_ms == 1234 and load_settings().fsync == "always"
    monkeypatch.setenv("PI_WORKFLOWS_LEASE_MS", "4321")
    assert load_settings().lease_ms == 4321
    assert load_settings(lease_ms=999).lease_ms == 999  # arguments win


@pytest.mark.parametrize(("lease", "renew"), [(1000, 501), (30_000, 30_000), (30_000, 60_000)])
def test_a_renewal_slower_than_half_the_lease_is_refused(lease: int, renew: int) -> None:
    with pytest.raises(UsageError, match=r"renew_ms .* must be at most half of lease_ms"):
        load_settings(lease_ms=lease, renew_ms=renew)
    assert load_settings(lease_ms=lease, renew_ms=lease // 2).renew_ms == lease // 2


def test_bad_settings_are_one_clear_error(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    monkeypatch.setenv("PI_WORKFLOWS_FSYNC", "sometimes")
    with pytest.raises(UsageError, match="invalid setting fsync"):
        load_settings()
    env = {**os.environ, "PI_WORKFLOWS_LEASE_MS": "soon"}
    proc = run_cli("paths", "--project", str(tmp_path), env=env)
    assert proc.returncode == 2
    assert proc.stderr.startswith("pi-workflows: error: invalid setting lease_ms")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_paths_json_is_complete_and_creates_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "PI_WORKFLOWS_HOME": str(tmp_path / "h")}
    proc = run_cli("paths", "--json", "--project", str(tmp_path), env=env, check=True)
    data = json.loads(proc.stdout)
    assert set(data) == {"home", "stateDir", "storeFile", "runsDir", "hostLock", "logDir"}
    assert data["home"] == str(tmp_path / "h")
    assert not (tmp_path / "h").exists()


def test_private_dirs_and_log_file_modes(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        made = ensure_private_dir(tmp_path / "a" / "b" / "c")
        assert all(_mode(p) == 0o700 for p in (tmp_path / "a", tmp_path / "a" / "b", made))
        setup_logging(tmp_path / "logs", role="test")
        from loguru import logger
        logger.info("hello")
        assert _mode(tmp_path / "logs") == 0o700
        assert _mode(tmp_path / "logs" / LOG_FILE) == 0o600
        assert "hello" in (tmp_path / "logs" / LOG_FILE).read_text()
    finally:
        os.umask(old)
        setup_logging(None)


def test_missing_project_directory_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="project directory does not exist"):
        resolve_paths(load_settings(), tmp_path / "nope")


def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    monkeypatch.setenv("PI_WORKFLOWS_CONFIG", str(path))
    return path


def test_an_unknown_config_key_names_the_file_and_suggests_the_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _config(tmp_path, monkeypatch, "lease_ms = 30000\nlease_mss = 5\n")
    with pytest.raises(UsageError) as caught:
        load_settings()
    assert caught.value.message == (f"unknown key 'lease_mss' in the config file {path};"
                                    " did you mean 'lease_ms'?")
    assert caught.value.code == "config_invalid"
    _config(tmp_path, monkeypatch, "[xyzzy]\nconcurrency = 2\n")  # a table is a key too
    with pytest.raises(UsageError, match=r"unknown key .xyzzy. .*known keys: agent_reminders"):
        load_settings()


@pytest.mark.parametrize(("text", "expected"), [
    ('lease_ms = "soon"', "invalid setting lease_ms in the config file {path}: expected an"
                          " integer >= 100 and <= 86400000: Input should be a valid integer"),
    ("lease_ms = 5", "invalid setting lease_ms in the config file {path}: expected an integer"
                     " >= 100 and <= 86400000: Input should be greater than or equal to 100"),
    ('fsync = "sometimes"', "invalid setting fsync in the config file {path}: expected one of"
                            " always, node, never"),
    ("concurrency = 0", "invalid setting concurrency in the config file {path}: expected an"
                        " integer >= 1 and <= 256 (or left out)"),
    ('standby = "maybe"', "invalid setting standby in the config file {path}: expected true"
                          " or false"),
    ("lease_ms = ", "the config file {path} is not valid TOML: "),
])
def test_a_bad_config_value_names_the_file_the_key_and_the_type(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, expected: str) -> None:
    path = _config(tmp_path, monkeypatch, text + "\n")
    with pytest.raises(UsageError) as caught:
        load_settings()
    assert caught.value.message.startswith(expected.format(path=path)), caught.value.message
    assert "\n" not in caught.value.message


def test_a_bad_environment_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PI_WORKFLOWS_DRAIN_GRACE_S", "long")
    with pytest.raises(UsageError, match=r"^invalid setting drain_grace_s \(environment"
                                         r" variable PI_WORKFLOWS_DRAIN_GRACE_S\): expected"
                                         r" a number >= 0"):
        load_settings()


def test_config_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('fsnyc = "always"\n')
    env = {**os.environ, "PI_WORKFLOWS_CONFIG": str(config)}
    proc = run_cli("list", "--project", str(tmp_path), env=env)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (f"pi-workflows: error: unknown key 'fsnyc' in the config file"
                           f" {config}; did you mean 'fsync'?\n")
