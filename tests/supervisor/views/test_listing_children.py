"""``list`` names the controller of each child run with one store read for them all."""

from __future__ import annotations

from pathlib import Path

import pytest
from pi_workflows.protocol.store import RunSource, Store
from pi_workflows.protocol.store.controllers import fingerprint
from pi_workflows.supervisor.views.listing import select

from tests.helpers.store import put_in_state

pytestmark = pytest.mark.timeout(30)


def test_list_names_child_runs_controllers_without_a_read_per_run(
        store: Store, source: RunSource, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    put_in_state(store, "plain-1", "queued")
    store.apply_spec("files", "a", {})
    claim = store.claim_reconcile(["files"], "host-1", 30_000)
    assert claim is not None
    for n in (1, 2):
        store.start_child("files", "a", f"sync-{n}", source=source,
                          input_fingerprint=fingerprint(n), private_input={}, run_id=f"kid-{n}",
                          token=claim.token)
    calls: list[object] = []
    real = store.children_by_runs

    def counted(run_ids: object) -> object:
        calls.append(run_ids)
        return real(run_ids)  # type: ignore[arg-type]

    def one_by_one(run_id: str) -> None:
        raise AssertionError(f"a read per run ({run_id})")

    monkeypatch.setattr(store, "children_by_runs", counted)
    monkeypatch.setattr(store, "child_by_run", one_by_one)
    infos = {i["runId"]: i for i in select(store, tmp_path / "runs")}
    assert len(calls) == 1
    assert infos["kid-2"]["controller"] == {"controller": "files", "key": "a",
                                            "requestKey": "sync-2", "attempt": 1}
    assert infos["kid-1"]["controller"]["requestKey"] == "sync-1"
    assert "controller" not in infos["plain-1"]
