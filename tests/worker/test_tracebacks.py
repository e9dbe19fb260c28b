"""A node that raises leaves where it raised in its bundle, bounded and redacted.

A real workflow file whose compute (or action) node raises: its
``node_failed`` event holds the frames (file, line, function) down to the
line that raised in the workflow file, none of the worker's own, no local
values, and the exception's message redacted as the stored error is; a
deep stack keeps both ends within the frame bound. ``pi-workflows logs RUN
NODE``, ``status RUN --debug`` and ``--debug status RUN`` print it; plain
``status`` does not.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from tests.helpers.cli import run_cli
from tests.helpers.engine import Harness

pytestmark = pytest.mark.timeout(60)

BOOM = """
def helper(ctx):
    hidden = "local-value-" + "kept-out"  # a local: never recorded
    raise ValueError(f"bad value, token=sk-12345 and {len(hidden)}")  # the line


def explode(ctx):
    return helper(ctx)


workflow = define_workflow(start_at="one", nodes=[compute("one", explode)])
"""

ACTION = """
def send(ctx):
    raise RuntimeError("the mail server said no")  # the line


workflow = define_workflow(start_at="mail", nodes=[action("mail", send)])
"""

DEEP = """
def down(n):
    return down(n + 1)  # the line


workflow = define_workflow(start_at="deep", nodes=[compute("deep", lambda ctx: down(0))])
"""


def _failed_event(h: Harness, run_id: str) -> dict[str, Any]:
    events = [e for e in h.bundle(run_id).events() if e.get("type") == "node_failed"]
    assert len(events) == 1, events
    return dict(events[0]["payload"])


def _line_of(path: Any, marker: str = "# the line") -> int:
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines, start=1) if marker in line)


def _run(h: Harness, name: str, body: str) -> tuple[str, Any]:
    path = h.write(name, body)
    run_id = h.launch(name)
    out = h.execute(run_id)
    assert (out.outcome, out.error_code) == ("failed", "node_error")
    return run_id, path


def test_a_compute_node_that_raises_records_its_frames(h: Harness) -> None:
    run_id, path = _run(h, "boom", BOOM)
    record = _failed_event(h, run_id)["traceback"]
    frames = record["frames"]
    assert [(f["file"], f["function"]) for f in frames] == [
        (str(path), "explode"), (str(path), "helper")]  # no worker frame
    assert frames[-1]["line"] == _line_of(path)
    assert frames[0]["line"] == _line_of(path, "return helper(ctx)")
    assert record["exception"] == "ValueError: bad value, token=[redacted] and 20"
    assert record["omitted"] == 0
    # The stored error is what it was: the type and the redacted message, one line.
    assert h.row(run_id).error_message == "node 'one': " + record["exception"]
    trace = h.bundle(run_id).trace_path.read_text()
    assert "sk-12345" not in trace and "local-value-" not in trace


def test_an_action_node_that_raises_records_its_frames(h: Harness) -> None:
    run_id, path = _run(h, "mail", ACTION)
    frames = _failed_event(h, run_id)["traceback"]["frames"]
    assert (frames[-1]["file"], frames[-1]["line"], frames[-1]["function"]) == (
        str(path), _line_of(path), "send")


def test_a_deep_stack_keeps_both_ends_within_the_bound(h: Harness) -> None:
    run_id, path = _run(h, "deep", DEEP)
    record = _failed_event(h, run_id)["traceback"]
    frames = record["frames"]
    assert len(frames) == 20 and record["omitted"] > 100 and record["omittedAfter"] == 5
    assert frames[0]["function"] == "<lambda>"  # the workflow's outermost frame
    assert frames[-1] == {"file": str(path), "line": _line_of(path), "function": "down"}
    assert len(json.dumps(record)) < 16_000
    assert record["exception"].startswith("RecursionError: maximum recursion depth")


def _env(h: Harness) -> dict[str, str]:
    return {**os.environ, "PI_WORKFLOWS_STORE_FILE": str(h.store_path),
            "PI_WORKFLOWS_RUNS_DIR": str(h.runs)}


def test_logs_and_status_debug_show_the_traceback(h: Harness) -> None:
    run_id, path = _run(h, "boom", BOOM)
    where = f'  File "{path}", line {_line_of(path)}, in helper'
    logs = run_cli("logs", run_id, "one", env=_env(h), cwd=h.project)
    assert logs.returncode == 0, logs.stderr
    assert f"Traceback (most recent call last):\n  File \"{path}\"" in logs.stdout
    assert where + "\nValueError: bad value, token=[redacted] and 20\n" in logs.stdout
    as_json = run_cli("logs", run_id, "one", "--json", env=_env(h), cwd=h.project)
    step = json.loads(as_json.stdout)["steps"][0]
    assert step["traceback"]["frames"][-1]["line"] == _line_of(path)
    for args in (["status", run_id, "--debug"], ["--debug", "status", run_id]):
        shown = run_cli(*args, env=_env(h), cwd=h.project)
        assert shown.returncode == 0, shown.stderr
        assert "one (step 1, attempt " in shown.stdout and where in shown.stdout, args
    plain = run_cli("status", run_id, env=_env(h), cwd=h.project)
    assert "Traceback" not in plain.stdout and "File " not in plain.stdout
    assert "sk-12345" not in logs.stdout + shown.stdout + as_json.stdout
