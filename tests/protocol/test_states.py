"""The one vocabulary of states: its tables, and the schema held to it."""

from __future__ import annotations

import re

import pytest
from pi_workflows.protocol.errors import ExitCode, TransitionRefused
from pi_workflows.protocol.states import (
    ACTIVE,
    CLAIMED,
    QUEUE_STATES,
    SETTLED_STATUSES,
    TERMINAL,
    QueueState,
    RunStatus,
    check_transfer,
    check_transition,
    display_state,
    exit_code,
    queue_state_for,
    sql_list,
)
from pi_workflows.protocol.store.schema import SCHEMA_STATEMENTS

Q, S = QueueState, RunStatus


@pytest.mark.timeout(10)
def test_named_sets() -> None:
    assert {Q.STARTING, Q.RUNNING} == CLAIMED
    assert {Q.QUEUED, Q.STARTING, Q.RUNNING} == ACTIVE
    assert {Q.DONE, Q.FAILED, Q.CANCELLED} == TERMINAL
    assert {S.COMPLETED, S.WAITING, S.FAILED, S.TIMED_OUT, S.CANCELLED} == SETTLED_STATUSES
    assert S.RUNNING not in SETTLED_STATUSES


@pytest.mark.timeout(10)
def test_the_schema_spells_exactly_these_states() -> None:
    ddl = "\n".join(SCHEMA_STATEMENTS)
    check = re.search(r"state TEXT NOT NULL CHECK \(state IN\s+(\([^)]*\))\)", ddl)
    assert check is not None and " ".join(check.group(1).split()) == sql_list(
        frozenset(QUEUE_STATES))
    assert f"(claim_token IS NOT NULL) = (state IN {sql_list(CLAIMED)})" in ddl
    assert f"IS NOT NULL AND state IN {sql_list(ACTIVE)}" in " ".join(ddl.split())  # one slot
    assert "state NOT IN ('failed', 'cancelled')" in ddl  # a failed continuation frees its slot


@pytest.mark.timeout(10)
def test_a_settled_bundle_maps_onto_the_queue() -> None:
    assert queue_state_for("completed") == Q.DONE
    assert queue_state_for("waiting") == Q.DONE  # an answer is a new run
    assert queue_state_for("cancelled") == Q.CANCELLED
    assert queue_state_for("failed") == queue_state_for("timed_out") == Q.FAILED
    with pytest.raises(ValueError):
        queue_state_for("running")


@pytest.mark.timeout(10)
@pytest.mark.parametrize(("queue", "status", "code"), [
    ("done", "completed", ExitCode.OK),
    ("done", "waiting", ExitCode.WAITING),
    ("failed", "failed", ExitCode.RUN_FAILED),
    ("failed", "timed_out", ExitCode.RUN_FAILED),
    ("cancelled", "cancelled", ExitCode.RUN_FAILED),
    ("failed", "running", ExitCode.RUN_FAILED),  # the queue ended it; the bundle never did
    ("failed", None, ExitCode.RUN_FAILED),  # failed before it had a bundle
    ("parked", "running", ExitCode.PARKED),
    ("queued", None, ExitCode.PARKED),
    ("running", "running", None),
    ("starting", None, None),
])
def test_exit_code_for_queue_state_and_status(queue: str, status: str | None,
                                             code: ExitCode | None) -> None:
    assert exit_code(queue, status) == code


@pytest.mark.timeout(10)
def test_display_state_shows_both_only_when_they_differ() -> None:
    assert display_state("queued", None) == "queued"
    assert display_state("running", "running") == "running"
    assert display_state("done", "waiting") == "waiting"
    assert display_state("failed", "running") == "failed/running"
    assert display_state("parked", "running") == "parked/running"


@pytest.mark.timeout(10)
def test_writers_are_checked() -> None:
    check_transition("r1", "parked", "starting")
    with pytest.raises(TransitionRefused, match="r1 is done; it cannot become running"):
        check_transition("r1", "done", "running")
    check_transfer("r1", "running")
    with pytest.raises(TransitionRefused):
        check_transfer("r1", "parked")
