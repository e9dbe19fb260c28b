"""The command line's lean settings agree with the pydantic ones, or decline.

For every case of a matrix of environment variables and config files,
``lean_settings()`` either returns None (the caller then asks pydantic) or
exactly what ``load_settings()`` returns, field by field with the same types,
and the same resolved paths. The plain cases must not be declined: that is
what makes the fast path fast.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pi_workflows.protocol.errors import PiWorkflowsError
from pi_workflows.protocol.leansettings import current_settings, lean_settings
from pi_workflows.protocol.settings import Settings, load_settings, resolve_paths
from pi_workflows.protocol.settingspec import FIELDS, SettingsLike, defaults


def _pydantic() -> Any:
    try:
        return load_settings()
    except PiWorkflowsError as exc:
        return exc


def _agree(tmp_path: Path) -> Any:
    """Assert agreement; the lean result (None when it declined)."""
    lean = lean_settings()
    full = _pydantic()
    if lean is None:
        return None
    assert not isinstance(full, Exception), f"lean accepted what pydantic refuses: {full}"
    for name in Settings.model_fields:
        mine, theirs = getattr(lean, name), getattr(full, name)
        assert (type(mine), mine) == (type(theirs), theirs), name
    project = tmp_path / "proj"
    project.mkdir(exist_ok=True)
    assert resolve_paths(lean, project) == resolve_paths(full, project)
    return lean


def test_the_pydantic_model_is_built_from_the_one_declaration() -> None:
    assert list(Settings.model_fields) == list(FIELDS) == list(SettingsLike.__annotations__)
    for name, field in Settings.model_fields.items():
        spec = FIELDS[name]
        assert (field.annotation, field.default) == (spec.annotation, spec.default), name
        limits = {type(rule).__name__.lower(): getattr(rule, type(rule).__name__.lower())
                  for rule in field.metadata}
        assert limits == {k: v for k in ("ge", "gt", "le")
                          if (v := getattr(spec.bounds, k)) is not None}, name
    assert FIELDS["lease_ms"].bounds.ge == 100 and FIELDS["concurrency"].bounds.le == 256


def test_the_defaults_are_what_both_readers_give_without_input(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PI_WORKFLOWS_HOME")  # the suite's private home is a setting too
    monkeypatch.setenv("HOME", str(tmp_path))  # so no real ~/.pi config file is read
    lean, full, plain = lean_settings(), load_settings(), defaults()
    assert lean is not None
    for name in FIELDS:
        assert getattr(lean, name) == getattr(full, name) == getattr(plain, name), name


def test_current_settings_reads_lean_and_asks_pydantic_only_when_it_declines(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert type(current_settings()).__name__ == "Values"  # plain: no pydantic model
    monkeypatch.setenv("PI_WORKFLOWS_LEASE_MS", "30_000")  # pydantic's spelling only
    settings = current_settings()
    assert type(settings).__name__ == "Settings" and settings.lease_ms == 30_000
    monkeypatch.setenv("PI_WORKFLOWS_LEASE_MS", "50")
    with pytest.raises(PiWorkflowsError, match=r"lease_ms .*expected an integer >= 100"):
        current_settings()


PLAIN_ENV = [
    {},
    {"PI_WORKFLOWS_STATE_DIR": "/tmp/x/state"},
    {"PI_WORKFLOWS_STATE_DIR": "relative/state", "PI_WORKFLOWS_RUNS_DIR": "~/runs"},
    {"PI_WORKFLOWS_STORE_FILE": "/tmp/s.sqlite3", "PI_WORKFLOWS_HOST_LOCK": "/tmp/h.lock",
     "PI_WORKFLOWS_LOG_DIR": "/tmp/logs"},
    {"PI_WORKFLOWS_LEASE_MS": "60000", "PI_WORKFLOWS_RENEW_MS": "30000"},
    {"PI_WORKFLOWS_BUSY_TIMEOUT_MS": "0", "PI_WORKFLOWS_SQLITE_SYNCHRONOUS": "FULL"},
    {"PI_WORKFLOWS_FSYNC": "never", "PI_WORKFLOWS_LOG_LEVEL": "DEBUG"},
    {"PI_WORKFLOWS_CONCURRENCY": "4", "PI_WORKFLOWS_DRAIN_GRACE_S": "2.5"},
    {"PI_WORKFLOWS_DRAIN_GRACE_S": "3", "PI_WORKFLOWS_POLL_INTERVAL_S": "0.05"},
    {"PI_WORKFLOWS_STANDBY": "false"}, {"PI_WORKFLOWS_STANDBY": "1"},
    {"PI_WORKFLOWS_STANDBY": "off"}, {"PI_WORKFLOWS_STANDBY": "yes"},
    {"PI_WORKFLOWS_PI_BIN": "/usr/bin/pi", "PI_WORKFLOWS_PI_ARGS": "--model x --thinking off"},
    {"PI_WORKFLOWS_PI_BIN": "", "PI_WORKFLOWS_PI_ARGS": ""},
    {"PI_WORKFLOWS_PI_AGENT_DIR": "~/agent", "PI_WORKFLOWS_AGENT_REMINDERS": "10"},
    {"PI_WORKFLOWS_PROJECT_WORKFLOWS_DIR": "flows", "PI_WORKFLOWS_GLOBAL_WORKFLOWS_DIR": "/g"},
    {"PI_WORKFLOWS_SESSION": "editor-1", "PI_WORKFLOWS_DEBUG": "1", "PI_WORKFLOWS_PLAIN": "1"},
]

ODD_ENV = [
    {"PI_WORKFLOWS_LEASE_MS": "abc"}, {"PI_WORKFLOWS_LEASE_MS": "50"},
    {"PI_WORKFLOWS_LEASE_MS": " 30000"}, {"PI_WORKFLOWS_LEASE_MS": "30_000"},
    {"PI_WORKFLOWS_LEASE_MS": "+30000"}, {"PI_WORKFLOWS_LEASE_MS": "030000"},
    {"PI_WORKFLOWS_LEASE_MS": "3e4"}, {"PI_WORKFLOWS_LEASE_MS": "30000.0"},
    {"PI_WORKFLOWS_RENEW_MS": "20000"}, {"PI_WORKFLOWS_RENEW_MS": "10"},
    {"PI_WORKFLOWS_CONCURRENCY": "0"}, {"PI_WORKFLOWS_CONCURRENCY": "257"},
    {"PI_WORKFLOWS_CONCURRENCY": ""}, {"PI_WORKFLOWS_CONCURRENCY": "null"},
    {"PI_WORKFLOWS_DRAIN_GRACE_S": "-1"}, {"PI_WORKFLOWS_DRAIN_GRACE_S": "inf"},
    {"PI_WORKFLOWS_DRAIN_GRACE_S": "1e1"}, {"PI_WORKFLOWS_DRAIN_GRACE_S": ".5"},
    {"PI_WORKFLOWS_POLL_INTERVAL_S": "0"}, {"PI_WORKFLOWS_CRASH_WINDOW_S": "0.0"},
    {"PI_WORKFLOWS_STANDBY": "True"}, {"PI_WORKFLOWS_STANDBY": "maybe"},
    {"PI_WORKFLOWS_STANDBY": ""}, {"PI_WORKFLOWS_SQLITE_SYNCHRONOUS": "normal"},
    {"PI_WORKFLOWS_FSYNC": "sometimes"}, {"PI_WORKFLOWS_STATE_DIR": ""},
    {"PI_WORKFLOWS_STATE_DIR": " /tmp/x"}, {"PI_WORKFLOWS_AGENT_REMINDERS": "11"},
    {"pi_workflows_lease_ms": "60000"}, {"Pi_Workflows_State_Dir": "/tmp/y"},
    {"PI_WORKFLOWS_CONFIG": "/nonexistent/config.toml"},
]


@pytest.mark.parametrize("env", PLAIN_ENV, ids=lambda e: ",".join(e) or "defaults")
def test_plain_environments_resolve_the_same_and_lean(env: dict[str, str], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert _agree(tmp_path) is not None, "a plain case was declined"


@pytest.mark.parametrize("env", ODD_ENV, ids=lambda e: ",".join(f"{k}={v}" for k, v in e.items()))
def test_odd_environments_agree_or_decline(env: dict[str, str], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    _agree(tmp_path)


PLAIN_TOML = [
    'state_dir = "/tmp/t/state"\nlease_ms = 60000\nrenew_ms = 20000\n',
    'fsync = "always"\nsqlite_synchronous = "EXTRA"\nconcurrency = 3\nstandby = false\n',
    'drain_grace_s = 4\npoll_interval_s = 0.25\npi_args = "--model m"\npi_bin = "pi"\n',
    'runs_dir = "~/r"\nlog_dir = "logs"\nhost_lock = "/tmp/h.lock"\nhome = "/tmp/t/home"\n',
    '',
]

ODD_TOML = [
    'lease_ms = "60000"\n', 'lease_ms = 60000.0\n', 'standby = 1\n', 'standby = "true"\n',
    'drain_grace_s = true\n', 'concurrency = 0\n', 'fsync = "Always"\n', 'state_dir = 5\n',
    'state_dir = ""\n', 'pi_args = ["a"]\n', 'leas_ms = 1\n', 'lease_ms = \n',
    '[table]\nx = 1\n', 'renew_ms = 20000\n', 'log_level = 10\n',
]


def _write_config(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch,
                  explicit: bool) -> None:
    if explicit:
        path = tmp_path / "elsewhere.toml"
        monkeypatch.setenv("PI_WORKFLOWS_CONFIG", str(path))
    else:
        path = Path(os.environ["PI_WORKFLOWS_HOME"]) / "config.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize("explicit", [False, True], ids=["home-config", "PI_WORKFLOWS_CONFIG"])
@pytest.mark.parametrize("text", PLAIN_TOML)
def test_plain_config_files_resolve_the_same_and_lean(text: str, explicit: bool, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _write_config(tmp_path, text, monkeypatch, explicit)
    assert _agree(tmp_path) is not None, "a plain config file was declined"


@pytest.mark.parametrize("text", ODD_TOML)
def test_odd_config_files_agree_or_decline(text: str, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _write_config(tmp_path, text, monkeypatch, False)
    _agree(tmp_path)


def test_the_environment_wins_over_the_config_file(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _write_config(tmp_path, 'lease_ms = 60000\nfsync = "never"\n', monkeypatch, False)
    monkeypatch.setenv("PI_WORKFLOWS_LEASE_MS", "90000")
    lean = _agree(tmp_path)
    assert lean is not None and (lean.lease_ms, lean.fsync) == (90000, "never")


def test_a_config_file_that_is_a_directory_is_declined(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "dir.toml").mkdir()
    monkeypatch.setenv("PI_WORKFLOWS_CONFIG", str(tmp_path / "dir.toml"))
    assert lean_settings() is None
    assert isinstance(_pydantic(), PiWorkflowsError)


def test_a_config_of_dev_null_means_no_config_file_to_both_readers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PI_WORKFLOWS_CONFIG", os.devnull)
    lean = _agree(tmp_path)
    assert lean is not None and lean.lease_ms == 30_000  # read lean: no pydantic needed
    assert load_settings().lease_ms == 30_000


def test_a_config_that_is_not_a_regular_file_is_named_as_such(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    monkeypatch.setenv("PI_WORKFLOWS_CONFIG", str(fifo))
    with pytest.raises(PiWorkflowsError, match="is not a regular file"):
        load_settings()
