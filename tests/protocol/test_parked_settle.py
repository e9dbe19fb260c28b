"""Writing to a parked run without claiming it: cancel and ``resume --force``.

The ``Unclaimed`` fence lets ``cancel`` settle a parked run's bundle even when
the run's session holds another active run (a claim would re-enter the
session's one active slot), and refuses to write once a runner took it.
"""

from __future__ import annotations

import pytest
from pi_workflows.protocol.bundlewriter import BundleWriter
from pi_workflows.protocol.errors import ClaimLost
from pi_workflows.protocol.settle import Unclaimed, cancel_parked, repin_source
from pi_workflows.worker.control import Control

from tests.helpers.engine import Harness, assert_well_formed, types_of

pytestmark = pytest.mark.timeout(60)

FLOW = """
workflow = define_workflow(
    start_at="a",
    nodes=[compute("a", lambda ctx: {"a": 1}), compute("b", lambda ctx: {"b": 2})],
    edges=[edge("a", "b")],
)
"""


def _parked(h: Harness, *, session: str | None = None) -> str:
    h.write("flow", FLOW)
    run_id = h.launch("flow", session=session)
    parking = Control()
    parking.request_park()  # parks right after laying out the bundle
    out = h.execute(run_id, session=session, control=parking)
    assert out.outcome == "parked" and h.row(run_id).state == "parked"
    return run_id


def test_cancel_of_a_parked_run_whose_session_is_busy(h: Harness) -> None:
    run_id = _parked(h, session="s1")
    h.write("flow", FLOW)
    other = h.launch("flow", session="s1")  # the session's one active slot is taken
    row = cancel_parked(h.store, h.runs, run_id, fsync="never")
    assert row.state == "cancelled"
    events = assert_well_formed(h.bundle(run_id))
    assert types_of(events)[-1] == "run_cancelled"
    assert h.state(run_id)["status"] == "cancelled"
    assert h.row(other).state == "queued"


def test_the_unclaimed_fence_refuses_once_a_runner_took_the_run(h: Harness) -> None:
    run_id = _parked(h)
    claim = h.store.claim_by_id(run_id, "runner-b")  # a host resumed it meanwhile
    before = h.bundle(run_id).trace_path.read_bytes()
    with pytest.raises(ClaimLost):
        cancel_parked(h.store, h.runs, run_id, fsync="never")
    assert h.bundle(run_id).trace_path.read_bytes() == before  # nothing written
    assert h.row(run_id).claim_token == claim.token
    with pytest.raises(ClaimLost):
        BundleWriter(h.bundle(run_id), Unclaimed(h.store), "").reopen()


def test_a_run_cancelled_in_its_bundle_but_still_parked_is_cancelled_by_its_next_runner(
        h: Harness) -> None:
    run_id = _parked(h)
    # The cancel died between its two writes: bundle settled, queue still parked.
    from pi_workflows.protocol.settle import CANCELLED, settle_bundle
    settle_bundle(BundleWriter(h.bundle(run_id), Unclaimed(h.store), "", fsync="never"),
                  "run_cancelled", CANCELLED)
    assert h.row(run_id).state == "parked"
    out = h.execute(run_id)
    assert out.outcome == "cancelled" and h.row(run_id).state == "cancelled"


def test_resume_force_repins_and_unblocks_without_a_claim(h: Harness) -> None:
    run_id = _parked(h, session="s1")
    h.write("flow", FLOW.replace('{"b": 2}', '{"b": 3}'))  # the file changed
    out = h.execute(run_id, session="s1")
    assert out.outcome == "parked" and h.row(run_id).error_code == "source_changed"
    h.launch("flow", session="s1")  # the session is busy meanwhile: no claim is possible
    row = repin_source(h.store, h.runs, run_id, fsync="never")
    assert row.state == "parked" and row.error_code is None
    assert "source_repinned" in types_of(assert_well_formed(h.bundle(run_id)))
