"""``diff`` and ``apply_ops``: applying the ops between two JSON values gives the second."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pi_workflows.supervisor.views.stream.diff import apply_ops, diff

pytestmark = pytest.mark.timeout(60)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=2), inner,
                                                                   max_size=4),
    max_leaves=20)


@given(json_values, json_values)
@settings(max_examples=300, deadline=None)
def test_applying_the_diff_gives_the_new_value_and_leaves_the_old(old: Any, new: Any) -> None:
    import copy
    kept = copy.deepcopy(old)
    got = apply_ops(old, diff(old, new))
    assert json.dumps(got, sort_keys=True) == json.dumps(new, sort_keys=True)
    assert json.dumps(old, sort_keys=True) == json.dumps(kept, sort_keys=True)


def test_a_grown_list_is_one_append_and_an_unchanged_value_no_op() -> None:
    old = {"trace": [1, 2], "at": 1}
    assert diff(old, {"trace": [1, 2, 3, 4], "at": 1}) == [
        {"op": "append", "path": ["trace"], "values": [3, 4]}]
    assert diff(old, old) == []
    assert diff({"a": 1}, {"a": True}) == [{"op": "set", "path": ["a"], "value": True}]
    assert diff({"a": 1, "b": 2}, {"a": 1}) == [{"op": "del", "path": ["b"]}]
