"""Bad input that once reached a command's top as a bug (exit 70) is a usage error (exit 2).

Each case runs on the fast path and on the typer app
(``PI_WORKFLOWS_NO_FAST_CLI=1``), in process (``tests.helpers.cli``), and
must give exit 2 and the same one line on stderr, without a traceback:
an answer whose words are not UTF-8 (argv bytes reach Python as lone
surrogates), JSON that decodes to such text, and a ``list --limit`` past
what SQLite can hold.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.cli import CliResult, run_cli
from tests.helpers.engine import Harness

pytestmark = pytest.mark.timeout(60)

REVIEW = """
workflow = define_workflow(
    start_at="draft",
    nodes=[
        compute("draft", lambda ctx: {"text": "v1"}),
        checkpoint("approve", summary=lambda ctx: "approve?"),
    ],
    edges=[edge("draft", "approve")],
)
"""


def _env(h: Harness) -> dict[str, str]:
    return {**os.environ, "PI_WORKFLOWS_STORE_FILE": str(h.store_path),
            "PI_WORKFLOWS_RUNS_DIR": str(h.runs)}


def _both(h: Harness, *args: str, stdin: bytes = b"") -> CliResult:
    """The fast path's result, after checking the typer app's is the same."""
    fast = run_cli(*args, env=_env(h), cwd=h.project, stdin=stdin)
    full = run_cli(*args, env={**_env(h), "PI_WORKFLOWS_NO_FAST_CLI": "1"}, cwd=h.project,
                   stdin=stdin)
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        full.returncode, full.stdout, full.stderr), args
    assert "Traceback" not in fast.stderr and len(fast.stderr.splitlines()) == 1, fast.stderr
    return fast


def _waiting(h: Harness) -> str:
    h.write("review", REVIEW)
    run = h.launch("review")
    h.execute(run)
    assert h.state(run)["status"] == "waiting"
    return run


def test_an_answer_that_is_not_utf8_is_a_usage_error(h: Harness, tmp_path: Path) -> None:
    run = _waiting(h)
    bad = os.fsdecode(b"yes \xff\xfe")  # what argv bytes that are not UTF-8 become
    bad_file = tmp_path / "answer.json"
    bad_file.write_text('"\\udcff"')  # valid JSON, but a lone surrogate once decoded
    for json_flag in (["--json"], []):
        for args, where in (([bad], "the answer"),
                            (["--input-json", '"\\ud800"'], "--input-json"),
                            (["--input-json", f'"{bad}"'], "--input-json"),
                            (["--input-file", str(bad_file)], f"--input-file {bad_file}")):
            out = _both(h, "answer", run, *args, *json_flag)
            assert out.returncode == 2, out.stderr
            assert out.stderr == f"pi-workflows: error: {where} is not UTF-8 text\n"
    piped = _both(h, "answer", run, "--input-file", "-", "--json", stdin=b'"\\udcff"')
    assert piped.stderr == "pi-workflows: error: --input-file - is not UTF-8 text\n"
    # Nothing was answered: the run still waits, and a good answer still goes through.
    assert h.state(run)["status"] == "waiting"
    assert run_cli("answer", run, "yes", "--json", env=_env(h), cwd=h.project).returncode == 0


def test_task_words_that_are_not_utf8_are_a_usage_error(h: Harness) -> None:
    h.write("review", REVIEW)
    out = _both(h, "run", "review", os.fsdecode(b"\xff"), "--detach", "--json")
    assert (out.returncode, out.stderr) == (2, "pi-workflows: error: the task is not UTF-8 text\n")


def test_a_list_limit_past_what_sqlite_holds_is_a_usage_error(h: Harness) -> None:
    _waiting(h)  # a store with a run in it: the limit reaches the query
    for text in (str(2**63), str(2**63 - 1), "1000001", "9" * 30, "9" * 5000):
        for json_flag in (["--json"], []):
            out = _both(h, "list", "--limit", text, *json_flag)
            assert out.returncode == 2, out.stderr
            assert out.stderr.startswith("pi-workflows: error: Invalid value for '--limit': ")
    assert run_cli("list", "--limit", "1000000", "--json", env=_env(h),
                   cwd=h.project).returncode == 0


def test_watch_refuses_a_bundle_or_runs_directory_that_is_a_file(h: Harness) -> None:
    run = _waiting(h)
    bundle = h.runs / run
    saved = h.root / "saved-bundle"
    bundle.rename(saved)
    bundle.write_text("not a bundle\n")
    for json_flag in (["--json"], []):
        out = run_cli("watch", run, *json_flag, env=_env(h), cwd=h.project)
        assert (out.returncode, out.stderr) == (
            2, f"pi-workflows: error: refusing {bundle}: the run's bundle path is not a"
               " directory\n")
    bundle.unlink()
    saved.rename(bundle)
    h.runs.rename(h.root / "saved-runs")
    h.runs.write_text("not a directory\n")
    out = run_cli("watch", run, env=_env(h), cwd=h.project)
    assert (out.returncode, out.stderr) == (
        2, f"pi-workflows: error: refusing {h.runs}: the runs path is not a directory\n")
