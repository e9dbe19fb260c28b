"""Every definition rule has its own specific message; all problems are reported."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pi_workflows import (
    DEFAULT,
    DefinitionError,
    action,
    agent,
    checkpoint,
    compute,
    define_workflow,
    edge,
    notify,
    shell,
    switch,
)
from pi_workflows.protocol.commands import COMMAND_WORDS
from pi_workflows.protocol.definitions.routing import next_node
from pi_workflows.protocol.definitions.values import OutputError, apply_input, check_output
from pi_workflows.protocol.errors import UsageError


def fn(ctx: Any) -> dict[str, int]:
    return {"n": 1}


def base(**changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": "demo",
        "start_at": "a",
        "nodes": [compute("a", fn), notify("b", "done")],
        "edges": [edge("a", "b")],
    }
    spec.update(changes)
    return spec


def with_b(node: Any) -> dict[str, Any]:
    """A workflow whose second node is ``node`` (id "b")."""
    return base(nodes=[compute("a", fn), node])


def with_switch(item: Any, *extra: Any) -> dict[str, Any]:
    nodes = [compute("a", fn), notify("b", "x"), notify("c", "y"), *extra]
    return base(nodes=nodes, edges=[item])


CASES: list[tuple[str, Callable[[], dict[str, Any]], str]] = [
    ("node id pattern", lambda: base(nodes=[compute("a", fn), notify("1b", "x")],
                                     edges=[edge("a", "1b")]),
     "nodes[1]: node id '1b' is invalid: use 1-64 letters, digits, '_' or '-',"
     " starting with a letter"),
    ("node id too long", lambda: base(nodes=[compute("a", fn), notify("b" * 65, "x")],
                                      edges=[]),
     f"nodes[1]: node id {'b' * 65!r} is invalid: use 1-64 letters, digits, '_' or '-',"
     " starting with a letter"),
    ("node id not a string", lambda: base(nodes=[compute("a", fn), notify(7, "x")],  # type: ignore[arg-type]
                                          edges=[]),
     "nodes[1]: node id 7 is invalid: use 1-64 letters, digits, '_' or '-',"
     " starting with a letter"),
    ("duplicate node id", lambda: base(nodes=[compute("a", fn), notify("b", "x"),
                                              notify("b", "y")]),
     "node id 'b' is used by more than one node"),
    ("workflow name pattern", lambda: base(name="my flow"),
     "workflow name 'my flow' is invalid: use 1-64 letters, digits, '_' or '-',"
     " starting with a letter"),
    ("reserved workflow name", lambda: base(name="status"),
     "workflow name 'status' is reserved (it is a pi-workflows command word);"
     " choose another name"),
    ("reserved CLI verb", lambda: base(name="Validate"),
     "workflow name 'Validate' is reserved (it is a pi-workflows command word);"
     " choose another name"),
    ("start node missing", lambda: base(start_at="zz"),
     "start_at 'zz' is not a node of this workflow"),
    ("edge source missing", lambda: base(edges=[edge("a", "b"), edge("q", "b")]),
     "edge 'q' -> 'b': source 'q' is not a node"),
    ("edge target missing", lambda: base(edges=[edge("a", "q")]),
     "edge 'a' -> 'q': target 'q' is not a node"),
    ("two outgoing edges", lambda: base(nodes=[compute("a", fn), notify("b", "x"),
                                               notify("c", "y")],
                                        edges=[edge("a", "b"), edge("a", "c")]),
     "node 'a' has 2 outgoing edges; a node has at most one (use switch() to branch)"),
    ("unreachable node", lambda: base(nodes=[compute("a", fn), notify("b", "x"),
                                             notify("c", "y")]),
     "node 'c' is not reachable from start node 'a'"),
    ("switch on without prefix", lambda: with_switch(switch("a", "status", {"x": "b"})),
     "switch from 'a': on 'status' must start with '$.', '$output.' or '$result.'"),
    ("switch on empty segment", lambda: with_switch(switch("a", "$.a..b", {"x": "b"})),
     "switch from 'a': on '$.a..b' has an empty segment (check for '..' or a trailing '.')"),
    ("switch on brackets", lambda: with_switch(switch("a", "$.items[0]", {"x": "b"})),
     "switch from 'a': on '$.items[0]' has an invalid segment 'items[0]': segments are"
     " dot-separated keys without spaces or brackets (index lists as $.items.0)"),
    ("switch on exitCode of non-shell", lambda: with_switch(
        switch("a", "$result.exitCode", {0: "b"})),
     "switch from 'a': on '$result.exitCode' reads exitCode, which only shell nodes have"),
    ("switch case not scalar", lambda: with_switch(switch("a", "$.x", {(1, 2): "b"})),  # type: ignore[dict-item]
     "switch from 'a': case (1, 2) is not a scalar (string, number, boolean or None)"),
    ("switch without cases or default", lambda: with_switch(switch("a", "$.x", {})),
     "switch from 'a': needs at least one case or a default"),
    ("switch case target missing", lambda: with_switch(switch("a", "$.x", {"go": "zz"})),
     "switch from 'a': case 'go' targets 'zz', which is not a node"),
    ("switch default target missing", lambda: with_switch(
        switch("a", "$.x", {"go": "b"}, default="zz")),
     "switch from 'a': default targets 'zz', which is not a node"),
    ("switch cases not a dict", lambda: with_switch(switch("a", "$.x", [("go", "b")])),  # type: ignore[arg-type]
     "switch from 'a': cases must be a dict of value to target node, got list"),
    ("max_steps zero", lambda: base(max_steps=0),
     "max_steps must be a positive integer, got 0"),
    ("max_steps bool", lambda: base(max_steps=True),
     "max_steps must be a positive integer, got True"),
    ("node timeout negative", lambda: base(nodes=[compute("a", fn, timeout=-5),
                                                  notify("b", "x")]),
     "compute node 'a': timeout must be a positive number of seconds, got -5"),
    ("node timeout wrong type", lambda: with_b(checkpoint("b", timeout="10")),  # type: ignore[arg-type]
     "checkpoint node 'b': timeout must be DEFAULT, None, a positive number of seconds or a"
     " callable, got str"),
    ("workflow timeout invalid", lambda: base(timeout=0),
     "workflow: timeout must be a positive number of seconds, got 0"),
    ("shell command empty", lambda: with_b(shell("b", "  ")),
     "shell node 'b': command is empty"),
    ("shell command empty list", lambda: with_b(shell("b", [])),
     "shell node 'b': command is an empty list; give at least the program"),
    ("shell command list of non-strings", lambda: with_b(shell("b", ["echo", 3])),  # type: ignore[list-item]
     "shell node 'b': command list items must all be strings"),
    ("shell command wrong type", lambda: with_b(shell("b", 42)),  # type: ignore[arg-type]
     "shell node 'b': command must be a string, a list of strings or a callable of ctx,"
     " got int"),
    ("shell env not strings", lambda: with_b(shell("b", "true", env={"A": 1})),  # type: ignore[dict-item]
     "shell node 'b': env must be a dict of string to string, None or a callable of ctx"),
    ("shell max_output_bytes", lambda: with_b(shell("b", "true", max_output_bytes=0)),
     "shell node 'b': max_output_bytes must be a positive integer, got 0"),
    ("shell allow_nonzero_exit", lambda: with_b(shell("b", "true", allow_nonzero_exit="yes")),  # type: ignore[arg-type]
     "shell node 'b': allow_nonzero_exit must be True or False, got str"),
    ("shell cwd", lambda: with_b(shell("b", "true", cwd=3)),  # type: ignore[arg-type]
     "shell node 'b': cwd must be a path, None or a callable of ctx, got int"),
    ("notify kind", lambda: with_b(notify("b", "x", kind="loud")),
     "notify node 'b': kind must be 'progress' or 'final', got 'loud'"),
    ("notify message empty", lambda: with_b(notify("b", "")),
     "notify node 'b': message is empty"),
    ("agent prompt empty", lambda: with_b(agent("b", " ")),
     "agent node 'b': prompt is empty"),
    ("agent prompt wrong type", lambda: with_b(agent("b", 5)),  # type: ignore[arg-type]
     "agent node 'b': prompt must be a string or a callable of ctx, got int"),
    ("agent expected_output not a dict", lambda: with_b(agent("b", "p", expected_output=["x"])),  # type: ignore[arg-type]
     "agent node 'b': expected_output must be a dict (a JSON-schema-like description),"
     " got list"),
    ("agent expected_output not JSON", lambda: with_b(
        agent("b", "p", expected_output={"type": object()})),
     "agent node 'b': expected_output is not JSON-serialisable (Object of type object is"
     " not JSON serializable)"),
    ("agent validate not callable", lambda: with_b(agent("b", "p", validate="no")),  # type: ignore[arg-type]
     "agent node 'b': validate must be a callable (output, ctx) -> None | str, got str"),
    ("compute fn not callable", lambda: base(nodes=[compute("a", 3), notify("b", "x")]),  # type: ignore[arg-type]
     "compute node 'a': fn must be a callable taking ctx, got int"),
    ("action fn not callable", lambda: with_b(action("b", None)),  # type: ignore[arg-type]
     "action node 'b': fn must be a callable taking ctx, got NoneType"),
    ("action idempotent not bool", lambda: with_b(action("b", fn, idempotent=1)),  # type: ignore[arg-type]
     "action node 'b': idempotent must be True or False, got int"),
    ("checkpoint summary wrong type", lambda: with_b(checkpoint("b", summary=3)),  # type: ignore[arg-type]
     "checkpoint node 'b': summary must be a string or a callable of ctx, got int"),
    ("non-node in nodes", lambda: base(nodes=[compute("a", fn), notify("b", "x"), "c"]),
     "nodes[2] is not a node (got str); build nodes with compute(), action(), shell(),"
     " agent(), notify() or checkpoint()"),
    ("nodes not a list", lambda: base(nodes={"a": compute("a", fn)}),
     "nodes must be a list of nodes, got dict"),
    ("no nodes", lambda: base(nodes=[], edges=[]), "the workflow has no nodes"),
    ("non-edge in edges", lambda: base(edges=[edge("a", "b"), ("b", "a")]),
     "edges[1] is not an edge (got tuple); build edges with edge() or switch()"),
    ("input not callable", lambda: base(input={"type": "string"}),
     "input must be a callable that parses the raw run input, got dict"),
    ("description not a string", lambda: base(description=None),
     "description must be a string, got NoneType"),
]


@pytest.mark.parametrize(("spec", "expected"), [pytest.param(s, e, id=i) for i, s, e in CASES])
def test_invalid_definition_names_the_problem(
    spec: Callable[[], dict[str, Any]], expected: str,
) -> None:
    with pytest.raises(DefinitionError) as caught:
        define_workflow(**spec())
    assert expected in caught.value.problems, caught.value.problems
    assert caught.value.code == "workflow_invalid"
    assert isinstance(caught.value, UsageError)


@pytest.mark.parametrize("word", COMMAND_WORDS)
def test_every_command_word_is_a_reserved_workflow_name(word: str) -> None:
    for name in (word, word.upper()):
        with pytest.raises(DefinitionError) as caught:
            define_workflow(**base(name=name))
        assert caught.value.problems == [
            f"workflow name {name!r} is reserved (it is a pi-workflows command word);"
            " choose another name"]


def test_cases_are_distinct() -> None:
    messages = [expected for _, _, expected in CASES]
    assert len(set(messages)) == len(messages) >= 25


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(DefinitionError) as caught:
        define_workflow(
            name="run", start_at="nope", max_steps=-1,
            nodes=[compute("a", 1), shell("b", ""), notify("c", "x", kind="bad"), 9],  # type: ignore[arg-type]
            edges=[edge("a", "b"), edge("b", "zz"), switch("c", "oops", {})],
        )
    problems = caught.value.problems
    assert problems == [
        "workflow name 'run' is reserved (it is a pi-workflows command word);"
        " choose another name",
        "compute node 'a': fn must be a callable taking ctx, got int",
        "shell node 'b': command is empty",
        "notify node 'c': kind must be 'progress' or 'final', got 'bad'",
        "nodes[3] is not a node (got int); build nodes with compute(), action(), shell(),"
        " agent(), notify() or checkpoint()",
        "edge 'b' -> 'zz': target 'zz' is not a node",
        "switch from 'c': on 'oops' must start with '$.', '$output.' or '$result.'",
        "switch from 'c': needs at least one case or a default",
        "start_at 'nope' is not a node of this workflow",
        "max_steps must be a positive integer, got -1",
    ]
    assert str(caught.value).startswith("10 problems: workflow name 'run' is reserved")


def test_valid_definition_with_every_node_kind() -> None:
    wf = define_workflow(
        name="everything", start_at="calc", description="all kinds", max_steps=7, timeout=None,
        input=lambda raw: {"raw": raw},
        nodes=[
            compute("calc", fn, timeout=DEFAULT),
            action("act", fn, idempotent=True, timeout=5),
            shell("sh", "echo hi", cwd=".", env={"A": "1"}, stdin="in", timeout=2.5,
                  allow_nonzero_exit=True, max_output_bytes=10),
            shell("argv", ["echo", "hi"], timeout=None),
            shell("dyn", lambda ctx: ["true"], cwd=lambda ctx: ".", env=lambda ctx: {},
                  stdin=lambda ctx: "", timeout=lambda ctx: 3.0),
            agent("ask", lambda ctx: "prompt", expected_output={"type": "object"},
                  validate=lambda output, ctx: None),
            checkpoint("wait", summary=lambda ctx: "ok?"),
            notify("done", "finished", kind="final"),
        ],
        edges=[
            edge("calc", "act"), edge("act", "sh"), edge("sh", "argv"), edge("argv", "dyn"),
            switch("dyn", "$result.exitCode", {0: "ask"}, default="done"),
            switch("ask", "$output.verdict", {"wait": "wait", True: "done", None: "done",
                                               1.5: "done"}),
            edge("wait", "done"),  # a checkpoint may have an outgoing edge
        ],
    )
    assert list(wf.nodes) == ["calc", "act", "sh", "argv", "dyn", "ask", "wait", "done"]
    assert [n.kind for n in wf.nodes.values()] == [
        "compute", "action", "shell", "shell", "shell", "agent", "checkpoint", "notify"]
    assert wf.nodes["done"].notify_kind == "final"  # type: ignore[union-attr]
    assert wf.nodes["argv"].command == ["echo", "hi"]  # type: ignore[union-attr]
    assert wf.max_steps == 7 and wf.timeout is None and wf.name == "everything"


def test_loops_are_allowed_and_name_may_be_omitted() -> None:
    wf = define_workflow(
        start_at="a",
        nodes=[compute("a", fn), compute("b", fn)],
        edges=[edge("a", "b"), switch("b", "$.again", {True: "a"}, default=None)],
    )
    assert wf.name is None


@pytest.mark.parametrize("path", ["$", "$output"])
def test_whole_output_paths_are_allowed(path: str) -> None:
    item = switch("a", path, {"go": "b"})
    wf = define_workflow(start_at="a", nodes=[compute("a", fn), notify("b", "x")],
                         edges=[item])
    assert wf.edges == (item,)
    assert next_node(wf, "a", "go", None) == "b"  # the switch reads the whole output


def test_check_output_accepts_json_and_normalises_tuples() -> None:
    value = {"a": (1, 2.5, None, True), "b": {"c": ["x"]}}
    assert check_output("n", value) == {"a": [1, 2.5, None, True], "b": {"c": ["x"]}}


@pytest.mark.parametrize(("value", "message"), [
    ({"a": {1, 2}}, "output of node 'n' is not JSON-serialisable: $.a is of type set"),
    ({"a": [object()]}, "output of node 'n' is not JSON-serialisable: $.a.0 is of type object"),
    ({1: "x"}, "output of node 'n' has a non-string key 1 at $; JSON object keys are strings"),
    ([float("nan")], "output of node 'n' has nan at $.0; JSON has no NaN or infinity"),
])
def test_check_output_rejects_non_json(value: Any, message: str) -> None:
    with pytest.raises(OutputError) as caught:
        check_output("n", value)
    assert caught.value.problems == [message]
    assert caught.value.code == "output_invalid"


def test_check_output_rejects_cycles() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(OutputError, match="nested deeper than"):
        check_output("n", loop)


def _parse(raw: Any) -> dict[str, int]:
    if not isinstance(raw, int):
        raise TypeError("input must be a whole number")
    if raw < 0:
        raise ValueError("input must not be negative")
    return {"n": raw}


def test_apply_input_runs_the_parser() -> None:
    wf = define_workflow(name="numbers", start_at="a", nodes=[compute("a", fn)], input=_parse)
    assert apply_input(wf, 3) == {"n": 3}
    for raw, reason in (("x", "input must be a whole number"), (-1, "input must not be negative")):
        with pytest.raises(UsageError) as caught:
            apply_input(wf, raw)
        assert caught.value.code == "input_invalid"
        assert caught.value.message == f"invalid input for 'numbers': {reason}"


def test_apply_input_without_parser_requires_json() -> None:
    wf = define_workflow(name="plain", start_at="a", nodes=[compute("a", fn)])
    assert apply_input(wf, ["a"]) == ["a"]
    with pytest.raises(UsageError, match="the parsed input is not JSON-serialisable"):
        apply_input(wf, {"a": object()})


def test_apply_input_reports_a_crashing_parser() -> None:
    def broken(raw: Any) -> Any:
        return raw["missing"]

    wf = define_workflow(name="broken", start_at="a", nodes=[compute("a", fn)], input=broken)
    with pytest.raises(UsageError) as caught:
        apply_input(wf, {})
    assert caught.value.message == "the input parser of 'broken' failed: KeyError: 'missing'"


def test_the_reserved_names_in_the_docs_are_the_command_table() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "workflows.md").read_text()
    marker = doc.index("<!-- command words:")
    line = doc[marker:].splitlines()[1]
    assert re.findall(r"`([a-z-]+)`", line) == sorted(COMMAND_WORDS)
