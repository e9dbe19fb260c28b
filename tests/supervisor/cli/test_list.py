"""``pi-workflows list`` from a user's chair: the table, an empty answer, paging, bad numbers.

Each JSON case runs both ways (the fast path and the typer app, in process)
and the answers must be the same bytes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pi_workflows.protocol.paths import resolve_paths
from pi_workflows.protocol.settings import load_settings
from pi_workflows.protocol.store import Store

from tests.helpers.cli import CliResult, run_cli
from tests.helpers.store import put_in_state

pytestmark = pytest.mark.timeout(60)

IDS = [f"20990101T00000{n}Z-demo-0000abc{n}" for n in range(4)]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    paths = resolve_paths(load_settings(), tmp_path)
    paths.store_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with Store(paths.store_file) as store:
        for run_id in IDS:
            put_in_state(store, run_id, "queued")
        token = put_in_state(store, "20990101T000009Z-demo-0000abd9", "running")
        store.fail("20990101T000009Z-demo-0000abd9", token, "step_failed", "it broke " * 30)
    return tmp_path


def _cli(project: Path, *args: str, fast: bool = True, **env: str) -> CliResult:
    extra = {} if fast else {"PI_WORKFLOWS_NO_FAST_CLI": "1"}
    return run_cli("list", *args, "--project", str(project),
                   env={**os.environ, **extra, **env})


def _both(project: Path, *args: str) -> CliResult:
    fast, full = _cli(project, *args), _cli(project, *args, fast=False)
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        full.returncode, full.stdout, full.stderr), args
    return fast


def test_the_listing_has_a_header_and_fills_the_terminal(project: Path) -> None:
    wide = _cli(project, COLUMNS="200")
    assert wide.returncode == 0, wide.stderr
    lines = wide.stdout.splitlines()
    assert lines[0].split() == ["RUN", "WORKFLOW", "STATE", "CREATED", "DURATION", "DETAIL"]
    assert len(lines) == 1 + 5
    failed = next(line for line in lines if "step_failed" in line)
    assert len(failed) == 200 and failed.endswith("…")  # not cut (or wrapped) at 80
    # Not a terminal and no COLUMNS: one fixed width, whoever runs it.
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    piped = run_cli("list", "--project", str(project), env=env)
    assert max(len(line) for line in piped.stdout.splitlines()) == 120


def test_nothing_matching_says_so_with_the_filters(project: Path) -> None:
    out = _cli(project, "--until", "1h", "--workflow", "demo")
    assert out.returncode == 0 and out.stdout == "no runs match (--workflow demo, --until 1h)\n"
    assert _cli(project, "--offset", "9").stdout == "no runs match (--offset 9)\n"


def test_until_and_offset_agree_on_both_command_lines(project: Path) -> None:
    newest = [i["runId"] for i in json.loads(_both(project, "--json").stdout)["runs"]]
    page = json.loads(_both(project, "--json", "--offset", "1", "--limit", "2").stdout)
    assert [i["runId"] for i in page["runs"]] == newest[1:3]
    assert json.loads(_both(project, "--json", "--until", "1h").stdout) == {"runs": []}
    assert json.loads(_both(project, "--json", "--offset", "0").stdout)["runs"][0]["runId"] \
        == newest[0]


@pytest.mark.parametrize("args", [
    ["--limit", str(2 ** 63)], ["--limit", "99999999999999999999"], ["--offset", str(2 ** 63)],
    ["--offset", "-1"], ["--limit", "0"], ["--offset", "x"], ["--until", "soon"],
    ["--until", "2h", "--since", "1h"], ["--until", "10000000000d"],
])
def test_bad_numbers_and_windows_are_one_line_and_exit_2(project: Path, args: list[str]) -> None:
    for extra in ([], ["--json"]):
        out = _both(project, *args, *extra)
        assert out.returncode == 2, out.stderr
        assert out.stderr.startswith("pi-workflows: error: ") and out.stderr.count("\n") == 1
        assert out.stdout == ""
