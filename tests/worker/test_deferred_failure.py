"""A model-started run that fails or times out after it started: its worker's settle owes
the session one turn (issue 22, item 6), with how the run ended."""

from __future__ import annotations

import pytest
from pi_workflows.protocol.definitions.discovery import discover
from pi_workflows.protocol.store.turns import RUN_FAILED
from pi_workflows.supervisor.session.launch import prepare_run

from tests.helpers.engine import Harness

pytestmark = pytest.mark.timeout(60)

SLOW = """
import time

def slow(ctx):
    while not ctx.cancelled():
        time.sleep(0.01)

workflow = define_workflow(start_at="slow", nodes=[compute("slow", slow, timeout=0.2)])
"""


def _model_launch(h: Harness, name: str) -> str:
    prepared = prepare_run(discover(h.project, h.root / "global"), name, {})
    h.store.reserve(prepared.run_id, prepared.source, prepared.input, "s1", by_agent=True)
    return prepared.run_id


def test_a_timed_out_model_started_run_owes_one_turn_saying_so(h: Harness) -> None:
    h.write("slow", SLOW)
    run = _model_launch(h, "slow")
    assert h.execute(run, session="s1").outcome == "timed_out"
    [intent] = h.store.claim_turn_intents("s1")[1]
    assert (intent.source_event, intent.run_id) == (RUN_FAILED, run)
    assert intent.payload["runStatus"] == "timed_out"
    assert intent.payload["errorCode"] == "node_timed_out"
