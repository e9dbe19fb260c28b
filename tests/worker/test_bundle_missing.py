"""A run whose bundle went away is never rerun from scratch, nor its bundle remade."""

from __future__ import annotations

import shutil

import pytest
from pi_workflows.worker.control import Control

from tests.helpers.engine import GATES, Harness

pytestmark = pytest.mark.timeout(60)

FLOW = """
import shutil

def vanish(ctx):
    shutil.rmtree(h.GATES["bundle"])  # someone moves or deletes the bundle meanwhile
    return {"gone": True}

workflow = define_workflow(
    start_at="a",
    nodes=[compute("a", lambda ctx: {"a": 1}), compute("b", vanish),
           compute("c", lambda ctx: {"c": 3})],
    edges=[edge("a", "b"), edge("b", "c")],
)
"""

PLAIN = """
workflow = define_workflow(
    start_at="a",
    nodes=[compute("a", lambda ctx: {"a": 1}), compute("b", lambda ctx: {"b": 2})],
    edges=[edge("a", "b")],
)
"""


def test_a_parked_run_whose_bundle_was_deleted_fails_bundle_missing(h: Harness) -> None:
    h.write("plain", PLAIN)
    run_id = h.launch("plain")
    parking = Control()
    parking.request_park()
    assert h.execute(run_id, control=parking).outcome == "parked"
    shutil.rmtree(h.bundle(run_id).dir)
    out = h.execute(run_id)
    assert (out.outcome, out.error_code) == ("failed", "bundle_missing")
    row = h.row(run_id)
    assert (row.state, row.error_code) == ("failed", "bundle_missing")
    assert not h.bundle(run_id).dir.exists()  # not laid out again with made-up input


def test_a_bundle_deleted_while_the_run_runs_is_not_recreated(h: Harness) -> None:
    h.write("vanish", FLOW)
    run_id = h.launch("vanish")
    GATES["bundle"] = h.bundle(run_id).dir
    out = h.execute(run_id)
    assert (out.outcome, out.error_code) == ("failed", "bundle_missing")
    assert h.row(run_id).state == "failed"
    assert not h.bundle(run_id).dir.exists()


def test_a_bundle_path_that_is_a_file_fails_bundle_corrupt(h: Harness) -> None:
    h.write("plain", PLAIN)
    run_id = h.launch("plain")
    h.runs.mkdir(parents=True, exist_ok=True)
    h.bundle(run_id).dir.write_text("not a directory")
    out = h.execute(run_id)
    assert (out.outcome, out.error_code) == ("failed", "bundle_corrupt")
    assert h.bundle(run_id).dir.read_text() == "not a directory"
