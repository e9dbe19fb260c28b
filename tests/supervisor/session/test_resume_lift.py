"""``session.resume.lift``: what ``resume`` and the dashboard both do to free a run,
against a real store: a queued pause lifted, a pending pause withdrawn, a parked run
unblocked, a changed file refused without force, a running or ended run refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from pi_workflows.protocol.errors import UsageError
from pi_workflows.protocol.states import PAUSED_CODE
from pi_workflows.protocol.store import RunSource, Store
from pi_workflows.supervisor.session.resume import lift

pytestmark = pytest.mark.timeout(30)

SOURCE = RunSource("flow", "/x/flow.workflow.py", "0" * 64, "sha256:" + "0" * 64)
RUN = "20261201T000000Z-flow-00000001"


def test_a_queued_pause_is_lifted_and_the_run_is_free_again(store: Store,
                                                           tmp_path: Path) -> None:
    store.enqueue_detached(RUN, SOURCE, {})
    held = store.request_pause(RUN)
    assert held.error_code == PAUSED_CODE
    out = lift(store, tmp_path, held, force=False, fsync="never")
    assert out.paused and not out.withdrawn
    assert out.row.error_code is None and out.row.state == "queued"


def test_a_pause_not_reached_yet_is_withdrawn_and_the_run_goes_on(store: Store,
                                                                tmp_path: Path) -> None:
    claim = store.insert_and_claim(RUN, SOURCE, {}, "runner-1")
    store.mark_running(RUN, claim.token)
    asked = store.request_pause(RUN)
    out = lift(store, tmp_path, asked, force=False, fsync="never")
    assert out.withdrawn and out.row.state == "running" and out.row.error_code is None


def test_a_run_parked_for_a_person_is_unblocked(store: Store, tmp_path: Path) -> None:
    claim = store.insert_and_claim(RUN, SOURCE, {}, "runner-1")
    store.mark_running(RUN, claim.token)
    parked = store.park(RUN, claim.token, code="crash_loop", message="kept crashing")
    out = lift(store, tmp_path, parked, force=False, fsync="never")
    assert not out.paused and out.row.state == "parked" and out.row.error_code is None


def test_a_changed_file_is_refused_without_force_with_the_callers_hint(
        store: Store, tmp_path: Path) -> None:
    claim = store.insert_and_claim(RUN, SOURCE, {}, "runner-1")
    store.mark_running(RUN, claim.token)
    parked = store.park(RUN, claim.token, code="source_changed", message="changed")
    with pytest.raises(UsageError) as caught:
        lift(store, tmp_path, parked, force=False, fsync="never",
             force_hint="run `pi-workflows resume RUN --force`")
    assert caught.value.code == "source_changed"
    assert str(caught.value.message).endswith("run `pi-workflows resume RUN --force`")
    assert store.get(RUN).error_code == "source_changed"  # nothing changed


def test_a_running_or_ended_run_is_refused(store: Store, tmp_path: Path) -> None:
    claim = store.insert_and_claim(RUN, SOURCE, {}, "runner-1")
    running = store.mark_running(RUN, claim.token)
    with pytest.raises(UsageError) as caught:
        lift(store, tmp_path, running, force=False, fsync="never")
    assert caught.value.code == "not_parked"
    done = store.finish(RUN, claim.token, "completed")
    with pytest.raises(UsageError):
        lift(store, tmp_path, done, force=False, fsync="never")
