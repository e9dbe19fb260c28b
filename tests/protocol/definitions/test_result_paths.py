"""``$result.`` switch paths read any field of a node's result record, at any depth; a
field the record lacks reads as null (issue 23, item 5)."""

from __future__ import annotations

from typing import Any

import pytest
from pi_workflows import DefinitionError, compute, define_workflow, notify, shell, switch
from pi_workflows.protocol.definitions.routing import next_node, parse_path, resolve_path

from tests.helpers.engine import Harness

pytestmark = pytest.mark.timeout(30)
RECORD: dict[str, Any] = {"outcome": "ok", "errorCode": None, "error": None, "exitCode": 0,
                          "exit": "done", "usage": {"tokens": 12, "tools": ["read"]}}


@pytest.mark.parametrize(("path", "value"), [
    ("$result.exit", "done"),
    ("$result.usage.tokens", 12),
    ("$result.usage.tools.0", "read"),
    ("$result.usage", {"tokens": 12, "tools": ["read"]}),
    ("$result.outcome", "ok"),
    ("$result.missing", None),
    ("$result.usage.missing.deeper", None),
    ("$result.outcome.below", None),  # below a scalar: no such field, so null
    ("$result.usage.tools.5", None),
])
def test_any_field_of_the_record_is_read_and_a_missing_one_is_null(path: str,
                                                                    value: Any) -> None:
    assert parse_path(path).base == "result"
    assert resolve_path(path, {"ignored": True}, RECORD) == value


def _flow(on: str, first: Any = None) -> Any:
    return define_workflow(
        name="r", start_at="a", nodes=[first or compute("a", lambda ctx: 1),
                                       notify("known", "k"), notify("unknown", "u")],
        edges=[switch("a", on, {"done": "known", None: "unknown"})])


def test_a_switch_routes_on_a_field_beyond_the_four_and_on_its_absence() -> None:
    wf = _flow("$result.exit")
    assert next_node(wf, "a", 1, RECORD) == "known"
    assert next_node(wf, "a", 1, {"outcome": "ok"}) == "unknown"


def test_exit_code_is_still_refused_for_a_node_that_is_not_a_shell() -> None:
    with pytest.raises(DefinitionError) as caught:
        _flow("$result.exitCode")
    assert caught.value.problems == [
        "switch from 'a': on '$result.exitCode' reads exitCode, which only shell nodes have"]
    assert _flow("$result.exitCode", shell("a", "true")).nodes["a"].kind == "shell"


def test_a_run_routes_on_a_result_field_its_records_lack(h: Harness) -> None:
    h.write("lacks", """
        workflow = define_workflow(
            start_at="a",
            nodes=[compute("a", lambda ctx: 1), compute("known", lambda ctx: "k"),
                   compute("unknown", lambda ctx: "u")],
            edges=[switch("a", "$result.signal", {"TERM": "known", None: "unknown"})],
        )
    """)
    run_id = h.launch("lacks")
    assert h.execute(run_id).outcome == "completed"
    assert h.state(run_id)["finalOutput"] == "u"
