"""Routing after a node: plain edges and switches on $., $output. and $result."""

from __future__ import annotations

from typing import Any

import pytest
from pi_workflows import compute, define_workflow, edge, notify, shell, switch
from pi_workflows.protocol.definitions.routing import (
    RoutingError,
    next_node,
    parse_path,
    resolve_path,
    routes_failures,
)

OK: dict[str, Any] = {"outcome": "ok", "errorCode": None, "error": None}


def fn(ctx: Any) -> None:
    return None


def flow(item: Any, source_kind: str = "compute") -> Any:
    """Node "a" then the notify nodes among yes/no/other that ``item`` targets."""
    first = shell("a", "true") if source_kind == "shell" else compute("a", fn)
    targets = [item.target] if hasattr(item, "target") else [*item.cases.values(), item.default]
    ends = [notify(n, n) for n in ("yes", "no", "other") if n in targets]
    return define_workflow(name="route", start_at="a", nodes=[first, *ends], edges=[item])


def test_plain_edge_and_end_of_run() -> None:
    wf = flow(edge("a", "yes"))
    assert next_node(wf, "a", {"x": 1}, OK) == "yes"
    assert next_node(wf, "a", None, None) == "yes"
    assert next_node(wf, "yes", None, OK) is None


@pytest.mark.parametrize("on", ["$.review.verdict", "$output.review.verdict"])
def test_switch_on_output(on: str) -> None:
    wf = flow(switch("a", on, {"approve": "yes", "reject": "no"}))
    assert next_node(wf, "a", {"review": {"verdict": "approve"}}, OK) == "yes"
    assert next_node(wf, "a", {"review": {"verdict": "reject"}}, OK) == "no"


def test_switch_on_whole_output() -> None:
    wf = flow(switch("a", "$", {"approve": "yes"}, default="no"))
    assert next_node(wf, "a", "approve", OK) == "yes"
    assert next_node(wf, "a", "later", OK) == "no"


def test_integer_segments_index_lists() -> None:
    wf = flow(switch("a", "$.items.1.ok", {True: "yes", False: "no"}))
    assert next_node(wf, "a", {"items": [{"ok": False}, {"ok": True}]}, OK) == "yes"
    with pytest.raises(RoutingError, match=r"\$\.items is a list of 1 without '1'"):
        next_node(wf, "a", {"items": [{"ok": False}]}, OK)


def test_scalar_matching_is_json_typed() -> None:
    wf = flow(switch("a", "$.v", {True: "yes", 2: "no", None: "other"}))
    assert next_node(wf, "a", {"v": True}, OK) == "yes"
    assert next_node(wf, "a", {"v": 2.0}, OK) == "no"
    assert next_node(wf, "a", {"v": None}, OK) == "other"
    with pytest.raises(RoutingError, match="no case matches the number value"):
        next_node(wf, "a", {"v": 1}, OK)  # 1 is not true
    with pytest.raises(RoutingError, match="no case matches the string value"):
        next_node(wf, "a", {"v": "2"}, OK)


@pytest.mark.parametrize("on", ["$.verdict", "$output.verdict"])
def test_missing_value_fails_even_with_a_default(on: str) -> None:
    wf = flow(switch("a", on, {"approve": "yes"}, default="no"))
    with pytest.raises(RoutingError) as caught:
        next_node(wf, "a", {"other": 1}, OK)
    assert caught.value.code == "routing_failed"
    assert caught.value.message == (
        f"switch from 'a' on '{on}': no value at {on}: $ is an object without 'verdict'")
    with pytest.raises(RoutingError, match=r"no value at .*: \$ is null without 'verdict'"):
        next_node(wf, "a", None, OK)


def test_non_scalar_value_fails() -> None:
    wf = flow(switch("a", "$.verdict", {"approve": "yes"}, default="no"))
    with pytest.raises(RoutingError) as caught:
        next_node(wf, "a", {"verdict": {"nested": 1}}, OK)
    assert caught.value.message == (
        "switch from 'a' on '$.verdict': the value is an object, not a scalar"
        " (string, number, boolean or null)")


def test_no_match_with_and_without_default() -> None:
    with_default = flow(switch("a", "$.v", {"x": "yes"}, default="other"))
    assert next_node(with_default, "a", {"v": "y"}, OK) == "other"
    without = flow(switch("a", "$.v", {"x": "yes"}))
    with pytest.raises(RoutingError) as caught:
        next_node(without, "a", {"v": "y"}, OK)
    assert caught.value.message == (
        "switch from 'a' on '$.v': no case matches the string value (cases: 'x')"
        " and there is no default")
    assert "'y'" not in caught.value.message  # values may come from private input


def test_switch_on_result_routes_failures() -> None:
    wf = flow(switch("a", "$result.outcome", {"ok": "yes", "timed_out": "other"},
                     default="no"))
    assert routes_failures(wf, "a")
    assert next_node(wf, "a", {"x": 1}, OK) == "yes"
    failed = {"outcome": "failed", "errorCode": "node_error", "error": "boom"}
    assert next_node(wf, "a", None, failed) == "no"
    assert next_node(wf, "a", None, {**failed, "outcome": "timed_out"}) == "other"


def test_switch_on_result_error_code() -> None:
    wf = flow(switch("a", "$result.errorCode", {"effect_indeterminate": "other", None: "yes"},
                     default="no"))
    assert next_node(wf, "a", 1, OK) == "yes"
    assert next_node(wf, "a", None, {"outcome": "failed", "errorCode": "effect_indeterminate",
                                     "error": "maybe"}) == "other"
    assert next_node(wf, "a", None, {"outcome": "failed", "errorCode": "x",
                                     "error": "e"}) == "no"


def test_switch_on_exit_code_of_shell() -> None:
    wf = flow(switch("a", "$result.exitCode", {0: "yes", 1: "no"}, default="other"),
              source_kind="shell")
    assert next_node(wf, "a", None, {**OK, "exitCode": 0}) == "yes"
    assert next_node(wf, "a", None, {"outcome": "failed", "errorCode": "shell_nonzero_exit",
                                     "error": "status 1", "exitCode": 1}) == "no"
    # A command that never exited on its own has no exitCode: it reads as null.
    assert next_node(wf, "a", None, {"outcome": "timed_out", "errorCode": "timeout",
                                     "error": "t"}) == "other"


def test_failure_without_result_switch_is_not_routed() -> None:
    for item in (edge("a", "yes"), switch("a", "$.v", {"x": "yes"}, default="no")):
        wf = flow(item)
        assert not routes_failures(wf, "a")
        with pytest.raises(RoutingError, match="ended failed and its outgoing edge does not"
                                               " route that outcome"):
            next_node(wf, "a", None, {"outcome": "failed", "errorCode": "e", "error": "x"})
    assert not routes_failures(flow(edge("a", "yes")), "yes")


def test_failure_with_no_matching_result_case_and_no_default() -> None:
    wf = flow(switch("a", "$result.outcome", {"ok": "yes"}))
    with pytest.raises(RoutingError, match="no case matches the string value"):
        next_node(wf, "a", None, {"outcome": "failed", "errorCode": "e", "error": "x"})


def test_unknown_node() -> None:
    with pytest.raises(RoutingError, match="cannot route from 'zz': it is not a node"):
        next_node(flow(edge("a", "yes")), "zz", None, OK)


def test_resolve_path_forms() -> None:
    output = {"a": {"b": [10, 20]}}
    result = {"outcome": "failed", "errorCode": "x", "error": "e"}
    assert resolve_path("$.a.b.1", output, result) == 20
    assert resolve_path("$output.a.b.0", output, result) == 10
    assert resolve_path("$output", output, result) == output
    assert resolve_path("$result.outcome", output, result) == "failed"
    assert resolve_path(parse_path("$result.exitCode"), output, result) is None
    with pytest.raises(RoutingError, match="must start with"):
        resolve_path("a.b", output, result)


@pytest.mark.parametrize("text", ["", "$", "$.", "$..a", "$.a.", "$result",
                                  "$output.", "$ .a", "$.a b", "$.a[0]", "$results.outcome"])
def test_parse_path_rejects_malformed(text: str) -> None:
    if text == "$":
        assert parse_path(text).segments == ()
        return
    with pytest.raises(ValueError):
        parse_path(text)
