"""How a resource and its child runs read in ``controller list`` and ``get``."""

from __future__ import annotations

import pytest
from pi_workflows.protocol.errors import LimitError
from pi_workflows.protocol.store import Store
from pi_workflows.protocol.store.controllers import validate_resource_key
from pi_workflows.supervisor.views.controllers import child_state, get_page, resource_line

pytestmark = pytest.mark.timeout(30)


def test_a_resource_never_reconciled_reads_observed_dash(store: Store) -> None:
    store.apply_spec("files", "a", {})
    row = store.get_resource("files", "a")
    assert row is not None
    line = resource_line(row)
    assert line.endswith("generation 1 (observed -)"), line
    assert "None" not in "\n".join(get_page(row, [], [], []))


def test_a_child_attempt_reads_its_runs_state_not_the_records() -> None:
    class Child:
        def __init__(self, state: str, run_state: str | None) -> None:
            self.state, self.run_state = state, run_state

    assert child_state(Child("queued", "done")) == "run done"
    assert child_state(Child("reserved", None)) == "run not queued yet"
    assert child_state(Child("interrupted", "failed")) == "interrupted (run failed)"


@pytest.mark.parametrize("key", ["Bad Key", "tab\there", " lead", "new\nline"])
def test_a_key_with_whitespace_is_refused(store: Store, key: str) -> None:
    with pytest.raises(LimitError) as refused:
        validate_resource_key(key)
    assert refused.value.code == "invalid_resource_key"
    with pytest.raises(LimitError):
        store.apply_spec("files", key, {})
    assert store.list_resources() == []
