"""``pi-workflows delete RUN`` on the command line: what it says, and its exit codes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pi_workflows.protocol.paths import Paths, resolve_paths
from pi_workflows.protocol.settings import load_settings
from pi_workflows.protocol.store import Store

from tests.helpers.cli import CliResult, run_cli
from tests.helpers.store import put_in_state

pytestmark = pytest.mark.timeout(60)

DONE = "20990101T000000Z-demo-0000abcd"
OPEN = "20990101T000001Z-demo-0000abce"


def _project(tmp_path: Path) -> Paths:
    paths = resolve_paths(load_settings(), tmp_path)
    paths.store_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with Store(paths.store_file) as store:
        store.finish(DONE, put_in_state(store, DONE, "running"), "completed")
        put_in_state(store, OPEN, "parked")
    return paths


def _delete(tmp_path: Path, *args: str) -> CliResult:
    return run_cli("delete", *args, "--project", str(tmp_path), env=dict(os.environ))


def _one_error(out: CliResult) -> str:
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("pi-workflows: error: ") and out.stderr.count("\n") == 1
    return out.stderr


def test_delete_removes_an_ended_run_and_says_so(tmp_path: Path) -> None:
    paths = _project(tmp_path)
    out = _delete(tmp_path, "0000abcd")  # any reference `status` takes
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"deleted {DONE}  echo  done  (no bundle)\n"
    with Store(paths.store_file) as store:
        assert store.get(DONE) is None and store.get(OPEN) is not None
    assert "no run" in _one_error(_delete(tmp_path, DONE))  # the second time: unknown


def test_delete_json(tmp_path: Path) -> None:
    _project(tmp_path)
    out = _delete(tmp_path, DONE, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [d["runId"] for d in data["deleted"]] == [DONE]
    assert data["finished"] == [] and data["summary"] == {"runs": 1, "bytes": 0}


def test_a_run_not_ended_an_unknown_one_and_no_store_are_refused(tmp_path: Path) -> None:
    paths = _project(tmp_path)
    assert f"run {OPEN} was not deleted: it is parked; only a run that has ended" in _one_error(
        _delete(tmp_path, OPEN))
    assert "no run deadbeef" in _one_error(_delete(tmp_path, "deadbeef"))
    assert "invalid run id" in _one_error(_delete(tmp_path, "bad id!"))
    with Store(paths.store_file) as store:
        assert store.get(OPEN) is not None
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no runs yet" in _one_error(run_cli("delete", DONE, "--project", str(empty),
                                                env=dict(os.environ)))
    assert not resolve_paths(load_settings(), empty).store_file.exists()
