"""Run references (prefix, trailing hex), chains of continuations, and the list filters."""

from __future__ import annotations

from pathlib import Path

import pytest
from pi_workflows.protocol.errors import LimitError, NotFound, UsageError
from pi_workflows.protocol.settings import Paths
from pi_workflows.protocol.store import Store
from pi_workflows.supervisor.views.listing import check_state, grouped, listing_lines, select
from pi_workflows.supervisor.views.runref import SHOWN_MATCHES, resolve_run
from pi_workflows.supervisor.views.status import chain, status_with_chain

from tests.helpers.clocks import FakeClock
from tests.helpers.store import SOURCE, put_in_state

pytestmark = pytest.mark.timeout(30)

A = "20261201T083022Z-review-99624cea"
B = "20261201T083022Z-review-99624ceb"  # shares A's first seven hex digits
C = "20261202T100000Z-deploy-0123abcd"


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    state = tmp_path / "state"
    return Paths(project=tmp_path / "proj", home=tmp_path / "home", state_dir=state,
                 store_file=state / "store.sqlite3", runs_dir=state / "runs",
                 host_lock=state / "host.lock", log_dir=state / "logs")


@pytest.fixture
def three(store: Store) -> Store:
    for run_id in (A, B, C):
        put_in_state(store, run_id, "queued")
    return store


def test_a_whole_id_a_unique_prefix_or_the_trailing_hex_names_one_run(
        three: Store, paths: Paths) -> None:
    assert resolve_run(three, A, paths) == A
    assert resolve_run(three, "20261202", paths) == C  # a prefix of the id
    assert resolve_run(three, "99624cea", paths) == A  # the whole trailing hex part
    assert resolve_run(three, "0123", paths) == C  # a prefix of the trailing hex part
    assert resolve_run(three, "20261201T083022Z-review-99624ceb", paths) == B


def test_an_ambiguous_reference_lists_its_matches_and_changes_nothing(
        three: Store, paths: Paths) -> None:
    with pytest.raises(UsageError) as caught:
        resolve_run(three, "99624ce", paths)
    assert caught.value.code == "run_ambiguous" and caught.value.exit_code == 2
    assert f"matches {A}, {B}; give more" in caught.value.message
    with pytest.raises(UsageError, match="ambiguous"):
        resolve_run(three, "20261201", paths)


def test_the_ambiguous_list_is_bounded(store: Store, paths: Paths) -> None:
    ids = [f"20261203T000000Z-many-{n:08x}" for n in range(SHOWN_MATCHES + 3)]
    for run_id in ids:
        put_in_state(store, run_id, "queued")
    with pytest.raises(UsageError) as caught:
        resolve_run(store, "20261203", paths)
    message = caught.value.message
    assert sum(run_id in message for run_id in ids) == SHOWN_MATCHES
    assert message.endswith("and more; give more of the id")


def test_no_such_run_names_the_project_and_suggests_list(three: Store, paths: Paths) -> None:
    for text in ("nosuch", "99624cec", "ffff"):
        with pytest.raises(NotFound) as caught:
            resolve_run(three, text, paths)
        assert str(paths.project) in caught.value.message
        assert "pi-workflows list" in caught.value.message
    with pytest.raises(NotFound, match="pi-workflows list"):
        resolve_run(None, "99624cea", paths)  # no store yet
    with pytest.raises(LimitError, match="invalid run id"):
        resolve_run(three, "../etc", paths)  # never a path outside the runs dir


def test_a_bundle_without_a_row_is_found_by_its_exact_id(three: Store, paths: Paths) -> None:
    old = paths.runs_dir / "20261130T000000Z-old-aaaa0000"
    old.mkdir(parents=True)
    (old / "state.json").write_text("{}")
    assert resolve_run(three, "20261130T000000Z-old-aaaa0000", paths).endswith("aaaa0000")
    assert resolve_run(None, "20261130T000000Z-old-aaaa0000", paths).endswith("aaaa0000")
    with pytest.raises(NotFound):
        resolve_run(three, "20261130T000000Z-old", paths)  # a prefix needs a row


def _answer(store: Store, parent: str, child: str, state: str = "done") -> None:
    store.enqueue_detached(child, SOURCE, "yes", parent_run_id=parent)
    if state != "queued":
        token = store.claim_by_id(child, "runner-a").token
        if state == "failed":
            store.fail(child, token, "activation_failed", "it broke")
        else:
            store.mark_running(child, token)
            store.finish(child, token)


def test_a_chain_is_read_root_first_from_any_member(store: Store, paths: Paths) -> None:
    put_in_state(store, "p1", "done")
    _answer(store, "p1", "p1-failed", "failed")  # a failed answer frees the slot
    _answer(store, "p1", "c1")
    _answer(store, "c1", "c2", "queued")
    assert store.continuations() == {"p1": "c1", "c1": "c2"}
    assert store.continuation_of("p1").run_id == "c1"  # type: ignore[union-attr]
    assert store.continuation_of("c2") is None
    for member in ("p1", "c1", "c2"):
        row = store.get(member)
        assert row is not None
        assert [r.run_id for r in chain(store, row)] == ["p1", "c1", "c2"]
    info = status_with_chain(store, store.get("c1"), paths.runs_dir)  # type: ignore[arg-type]
    assert info["parentRunId"] == "p1" and info["continuedBy"] == "c2"
    assert [(m["runId"], m["queueState"]) for m in info["chain"]] == [
        ("p1", "done"), ("c1", "done"), ("c2", "queued")]
    assert [m["state"] for m in info["chain"]] == ["answered", "answered", "queued"]


def test_list_selects_newest_first_by_workflow_age_state_and_count(
        store: Store, clock: FakeClock[int], paths: Paths) -> None:
    first = clock.now
    put_in_state(store, "r1", "queued")
    clock.advance(60_000)
    put_in_state(store, "r2", "parked")
    clock.advance(60_000)
    put_in_state(store, "r3", "cancelled")
    runs = paths.runs_dir
    assert [i["runId"] for i in select(store, runs)] == ["r3", "r2", "r1"]
    assert [i["runId"] for i in select(store, runs, limit=2)] == ["r3", "r2"]
    assert [i["runId"] for i in select(store, runs, since_ms=first + 60_000)] == ["r3", "r2"]
    assert [i["runId"] for i in select(store, runs, state="parked")] == ["r2"]
    assert [i["runId"] for i in select(store, runs, state="queued", limit=1)] == ["r1"]
    assert select(store, runs, workflow="nope") == []
    assert len(select(store, runs, workflow=SOURCE.workflow)) == 3


def test_state_words_cover_queue_states_run_statuses_and_answered() -> None:
    for word in ("queued", "parked", "done", "waiting", "completed", "timed_out", "answered",
                 "parked/running", "failed/cancelled"):
        assert check_state(word) == word
    for bad in ("parked/", "/running", "parked/queued"):
        with pytest.raises(UsageError, match="unknown state"):
            check_state(bad)
    with pytest.raises(UsageError) as caught:
        check_state("wating")
    assert caught.value.exit_code == 2
    assert "waiting" in caught.value.message and "queued" in caught.value.message


def _info(run_id: str, created: int, parent: str | None = None,
          child: str | None = None) -> dict[str, object]:
    return {"runId": run_id, "workflow": "review", "queueState": "done", "runStatus":
            "waiting" if child else "completed", "createdAt": created, "parentRunId": parent,
            "continuedBy": child, "startedAt": created, "finishedAt": created + 1500,
            "errorCode": None, "error": None}


def test_a_listing_groups_a_chain_under_its_first_run_by_its_newest_member() -> None:
    infos = [_info("c2", 50, parent="c1"), _info("solo", 40), _info("c1", 30, "p1", "c2"),
             _info("orphan", 20, parent="gone"), _info("p1", 10, child="c1")]
    assert [(depth, i["runId"]) for depth, i in grouped(infos)] == [
        (0, "p1"), (1, "c1"), (2, "c2"), (0, "solo"), (0, "orphan")]
    lines = listing_lines(infos, now_ms=125_000)
    assert lines[0].split() == ["RUN", "WORKFLOW", "STATE", "CREATED", "DURATION", "DETAIL"]
    assert lines[1].split() == ["p1", "review", "answered", "2", "min", "ago", "1.5", "s"]
    assert lines[2].split()[:4] == ["->", "c1", "review", "answered"]
    assert lines[2].startswith("  -> c1")
    assert lines[3].startswith("    -> c2") and lines[3].split()[3] == "completed"
    assert lines[5].endswith("(continues gone)")
    assert not any("None" in line for line in lines)
