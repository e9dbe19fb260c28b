"""Outputs the trace cannot hold fail the node (``output_invalid``), routable; no crash."""

from __future__ import annotations

import pytest

from tests.helpers.engine import Harness, assert_well_formed, types_of

pytestmark = pytest.mark.timeout(60)

FLOW = """
import os

def listing(ctx):
    return {"names": ["caf\\udce9.txt"]}  # os.listdir() of a latin-1 file name

def huge(ctx):
    return {"n": 10 ** 5000}

def recover(ctx):
    return {"routed": ctx.results[ctx.input["which"]]["errorCode"]}

workflow = define_workflow(
    start_at="pick",
    nodes=[compute("pick", lambda ctx: {"which": ctx.input["which"]}),
           compute("listing", listing), compute("huge", huge),
           compute("recover", recover)],
    edges=[switch("pick", "$.which", {"listing": "listing", "huge": "huge"}),
           switch("listing", "$result.outcome", {"failed": "recover"}),
           switch("huge", "$result.outcome", {"failed": "recover"})],
)
"""


@pytest.mark.parametrize("which", ["listing", "huge"])
def test_an_unwritable_output_fails_the_node_and_routes(h: Harness, which: str) -> None:
    h.write("bad", FLOW)
    run_id = h.launch("bad", {"which": which})
    out = h.execute(run_id)
    assert out.outcome == "completed"
    state = h.state(run_id)
    assert state["results"][which]["errorCode"] == "output_invalid"
    assert state["finalOutput"] == {"routed": "output_invalid"}
    assert "node_failed" in types_of(assert_well_formed(h.bundle(run_id)))
    assert h.row(run_id).state == "done"
