"""The definition model: timeouts, snapshots and digests."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pi_workflows import (
    DEFAULT,
    agent,
    checkpoint,
    compute,
    define_workflow,
    definition_digest,
    edge,
    notify,
    shell,
    snapshot,
    switch,
)
from pi_workflows.protocol.definitions.graph import (
    SNAPSHOT_SCHEMA,
    DefinitionError,
    outgoing,
    resolve_timeout,
    resolve_value,
)

from tests.helpers.definitions import make_ctx


def fn(ctx: Any) -> int:
    return 1


def one(node: Any, timeout: float | None = 900.0) -> Any:
    return define_workflow(name="t", start_at=node.id, nodes=[node], timeout=timeout)


def test_resolve_timeout_default_none_number_callable() -> None:
    ctx = make_ctx(input={"budget": 42})
    assert resolve_timeout(compute("a", fn), one(compute("a", fn)), ctx) == 900.0
    default_node = compute("a", fn, timeout=DEFAULT)
    assert resolve_timeout(default_node, one(default_node, timeout=60), ctx) == 60.0
    assert resolve_timeout(default_node, one(default_node, timeout=None), ctx) is None
    assert resolve_timeout(compute("a", fn, timeout=None), one(compute("a", fn)), ctx) is None
    assert resolve_timeout(compute("a", fn, timeout=5), one(compute("a", fn)), ctx) == 5.0
    dynamic = compute("a", fn, timeout=lambda c: c.input["budget"])
    assert resolve_timeout(dynamic, one(dynamic), ctx) == 42.0
    unlimited = compute("a", fn, timeout=lambda c: None)
    assert resolve_timeout(unlimited, one(unlimited), ctx) is None


def test_resolve_timeout_rejects_a_bad_computed_value() -> None:
    node = compute("a", fn, timeout=lambda c: -1)
    with pytest.raises(DefinitionError, match="timeout must be a positive number"):
        resolve_timeout(node, one(node), make_ctx())


def test_resolve_value_and_context() -> None:
    ctx = make_ctx(input="x")
    assert resolve_value(lambda c: c.input * 2, ctx) == "xx"
    assert resolve_value("plain", ctx) == "plain"
    assert not ctx.cancelled()
    ctx.cancel.set()
    assert ctx.cancelled()


def _rich() -> Any:
    def build_prompt(ctx: Any) -> str:
        return "p"

    return define_workflow(
        name="rich", start_at="a", description="d", max_steps=9,
        input=lambda raw: raw,
        nodes=[
            compute("a", fn, timeout=lambda c: 3),
            shell("s", ["echo", "x"], env={"K": "V"}, cwd=".", stdin=lambda c: "in"),
            agent("ask", build_prompt, expected_output={"type": "object"},
                  validate=lambda o, c: None),
            checkpoint("wait", summary="ok?"),
            notify("n", "bye", kind="final"),
        ],
        edges=[edge("a", "s"), switch("s", "$result.exitCode", {0: "ask", None: "n"},
                                      default="n"),
               edge("ask", "wait"), edge("wait", "n")],
    )


def _callables(value: Any) -> list[Any]:
    if callable(value):
        return [value]
    if isinstance(value, dict):
        return [c for v in value.values() for c in _callables(v)]
    if isinstance(value, list):
        return [c for v in value for c in _callables(v)]
    return []


def test_snapshot_is_json_without_functions() -> None:
    snap = snapshot(_rich())
    assert _callables(snap) == []
    assert json.loads(json.dumps(snap)) == snap
    assert snap["schema"] == SNAPSHOT_SCHEMA
    assert snap["name"] == "rich" and snap["startAt"] == "a" and snap["maxSteps"] == 9
    assert snap["input"] == {"callable": "_rich.<locals>.<lambda>"}
    nodes = {n["id"]: n for n in snap["nodes"]}
    assert [n["id"] for n in snap["nodes"]] == ["a", "s", "ask", "wait", "n"]
    assert nodes["a"] == {"id": "a", "kind": "compute", "fn": {"callable": "fn"},
                          "timeout": {"callable": "_rich.<locals>.<lambda>"}}
    assert nodes["s"]["command"] == ["echo", "x"] and nodes["s"]["env"] == {"K": "V"}
    assert nodes["s"]["timeout"] == "default" and nodes["s"]["maxOutputBytes"] == 1_048_576
    assert nodes["ask"]["prompt"] == {"callable": "_rich.<locals>.build_prompt"}
    assert nodes["ask"]["expectedOutput"] == {"type": "object"}
    assert nodes["n"]["notifyKind"] == "final" and nodes["wait"]["summary"] == "ok?"
    assert snap["edges"][1] == {
        "type": "switch", "source": "s", "on": "$result.exitCode", "default": "n",
        "cases": [{"value": 0, "target": "ask"}, {"value": None, "target": "n"}]}


def test_digest_is_stable_and_tracks_changes() -> None:
    first, second = _rich(), _rich()
    assert first is not second
    digest = definition_digest(first)
    assert digest == definition_digest(second)
    assert digest.startswith("sha256:") and len(digest) == 7 + 64
    changed = define_workflow(name="rich", start_at="a", nodes=[compute("a", fn)])
    assert definition_digest(changed) != digest


def test_outgoing() -> None:
    wf = _rich()
    assert outgoing(wf, "a") == edge("a", "s")
    assert outgoing(wf, "n") is None


def test_presentation_prompt_is_text_or_a_function_and_changes_the_digest_only_when_set(
        ) -> None:
    plain = define_workflow(name="p", start_at="a", nodes=[compute("a", fn)])
    assert "presentationPrompt" not in snapshot(plain)  # earlier digests stay as they were
    told = define_workflow(name="p", start_at="a", nodes=[compute("a", fn)],
                           presentation_prompt="Tell the user.")
    assert snapshot(told)["presentationPrompt"] == "Tell the user."
    assert definition_digest(told) != definition_digest(plain)
    computed = define_workflow(name="p", start_at="a", nodes=[compute("a", fn)],
                               presentation_prompt=lambda state: "x")
    assert computed.presentation_prompt is not None
    for bad, words in ((42, "must be text or a function"), ("  ", "must not be empty"),
                       ("x" * 50_001, "longer than 50,000 characters")):
        with pytest.raises(DefinitionError, match=words):
            define_workflow(name="p", start_at="a", nodes=[compute("a", fn)],
                            presentation_prompt=bad)  # type: ignore[arg-type]
