"""``decision`` and ``decision_edge``: what they compile to, the prompt and the check, every
``validate`` message, and the digests of definitions that use neither (issue 23, item 3)."""

from __future__ import annotations

from typing import Any

import pytest
from pi_workflows import (
    DefinitionError,
    agent,
    compute,
    decision,
    decision_edge,
    define_workflow,
    edge,
    switch,
)
from pi_workflows.protocol.definitions.decisions_agent import DecisionEdge, DecisionNode
from pi_workflows.protocol.definitions.graph import definition_digest, snapshot
from pi_workflows.protocol.definitions.routing import RoutingError, next_node
from pi_workflows.worker.agent import schema_problem

from tests.helpers.definitions import make_ctx

pytestmark = pytest.mark.timeout(30)
TARGETS = [compute("fix", lambda ctx: 1), compute("plan", lambda ctx: 2)]


def _flow(node: Any = None, cases: Any = None, *, edges: list[Any] | None = None) -> Any:
    node = node or decision("kind", question="Bug or feature?", choices=["bug", "feature"])
    return define_workflow(
        name="triage", start_at="kind", nodes=[node, *TARGETS],
        edges=edges if edges is not None else [
            decision_edge("kind", cases or {"bug": "fix", "feature": "plan"})])


def _problems(**kw: Any) -> list[str]:
    with pytest.raises(DefinitionError) as caught:
        _flow(**kw)
    return caught.value.problems


def test_a_decision_is_an_agent_node_and_its_edge_a_switch_on_its_field() -> None:
    wf = _flow(decision("kind", question="Bug or feature?", choices=["bug", "feature"],
                        field="verdict"))
    node = wf.nodes["kind"]
    assert isinstance(node, DecisionNode) and node.kind == "agent"
    [item] = wf.edges
    assert isinstance(item, DecisionEdge) and item.on == "$.verdict" and item.default is None
    assert next_node(wf, "kind", {"verdict": "feature"}, None) == "plan"
    assert next_node(wf, "kind", {"verdict": "bug", "reason": "it crashes"}, None) == "fix"
    with pytest.raises(RoutingError):
        next_node(wf, "kind", {"verdict": "neither"}, None)


def test_the_prompt_lists_every_choice_after_the_question_and_the_context() -> None:
    node = decision("kind", question=lambda ctx: f"What is issue {ctx.input['n']}?",
                    choices=["bug", "feature", "question"],
                    prompt=lambda ctx: "It says: the button is gone.")
    text = node.prompt(make_ctx(input={"n": 7}))  # type: ignore[operator]
    assert text.startswith("What is issue 7?")
    assert "It says: the button is gone." in text
    listed = [line for line in text.splitlines() if line.startswith("- ")]
    assert listed == ["- bug", "- feature", "- question"]
    assert "'route' field" in text


def test_the_check_refuses_any_other_value_and_the_schema_says_so_too() -> None:
    node = decision("kind", question="Bug or feature?", choices=["bug", "feature"])
    check, schema = node.validate, node.expected_output
    assert check is not None and schema is not None
    ctx = make_ctx()
    assert check({"route": "bug"}, ctx) is None
    for wrong in ({"route": "Bug"}, {"route": "other"}, {"route": None}, {}, "bug", ["bug"]):
        assert check(wrong, ctx) == "'route' must be exactly one of 'bug', 'feature'", wrong
    assert schema_problem({"route": "other"}, schema) == (
        "output.route must be one of ['bug', 'feature']")
    assert schema_problem({"reason": "x"}, schema) == "output is missing required field 'route'"
    assert schema_problem({"route": "feature", "reason": "asks for it"}, schema) is None


@pytest.mark.parametrize(("kw", "expected"), [
    ({"cases": {"bug": "fix"}},
     "decision_edge from 'kind': no case for choice 'feature'; every choice needs one"),
    ({"cases": {"bug": "fix", "feature": "plan", "chore": "plan"}},
     "decision_edge from 'kind': case 'chore' is not one of the choices of 'kind'"
     " ('bug', 'feature')"),
    ({"cases": {"bug": "fix", "feature": "nowhere"}},
     "decision_edge from 'kind': case 'feature' targets 'nowhere', which is not a node"),
    ({"node": decision("kind", question="?", choices=["bug", ""])},
     "decision node 'kind': choices[1] is ''; each choice is non-empty text"),
    ({"node": decision("kind", question="?", choices=["bug", "feature", "bug"])},
     "decision node 'kind': choice 'bug' is listed more than once"),
    ({"node": decision("kind", question="?", choices=[])},
     "decision node 'kind': choices is empty; give at least two"),
    ({"node": decision("kind", question="?", choices=["bug"])},
     "decision node 'kind': choices has only 'bug'; a decision needs at least two"),
    ({"node": decision("kind", question="?", choices="bug,feature")},  # type: ignore[arg-type]
     "decision node 'kind': choices must be a list of text, got str"),
    ({"node": decision("kind", question="  ", choices=["bug", "feature"])},
     "decision node 'kind': question must be non-empty text or a callable of ctx"),
    ({"node": decision("kind", question="?", choices=["bug", "feature"], field="a.b")},
     "decision node 'kind': field 'a.b' must be one key (letters, digits, '_' or '-',"
     " starting with a letter or '_')"),
    ({"node": compute("kind", lambda ctx: 1)},
     "decision_edge from 'kind': 'kind' is a compute node, not a decision(); route it with"
     " switch() instead"),
    ({"node": agent("kind", "Bug or feature?")},
     "decision_edge from 'kind': 'kind' is an agent node, not a decision(); route it with"
     " switch() instead"),
    ({"cases": ["bug", "feature"]},
     "decision_edge from 'kind': cases must be a dict of choice to target node, got list"),
])
def test_validate_names_the_node_and_the_mistake(kw: dict[str, Any], expected: str) -> None:
    problems = _problems(**kw)
    assert expected in problems, problems


def test_a_duplicate_choice_gives_one_message_not_one_per_edge_case_too() -> None:
    problems = _problems(node=decision("kind", question="?", choices=["bug", "bug", "feature"]))
    assert problems == ["decision node 'kind': choice 'bug' is listed more than once"]


def test_a_decision_may_also_route_with_a_plain_switch_or_edge() -> None:
    wf = _flow(edges=[switch("kind", "$.route", {"bug": "fix"}, default="plan")])
    assert next_node(wf, "kind", {"route": "feature"}, None) == "plan"
    wf = _flow(edges=[edge("kind", "fix"), edge("fix", "plan")])
    assert next_node(wf, "kind", {"route": "feature"}, None) == "fix"


def test_the_digest_covers_the_choices_and_leaves_other_definitions_alone() -> None:
    one = _flow()
    other = _flow(decision("kind", question="Bug or feature?", choices=["feature", "bug"]))
    assert definition_digest(one) != definition_digest(other)
    data = snapshot(one)["nodes"][0]
    assert data["decision"] == {"question": "Bug or feature?", "choices": ["bug", "feature"],
                                "field": "route", "prompt": None}
    plain = define_workflow(name="p", start_at="a", nodes=[agent("a", "Do it.")])
    assert "decision" not in snapshot(plain)["nodes"][0]
    assert "statusDetail" not in snapshot(plain)["nodes"][0]
    assert "title" not in snapshot(plain)


@pytest.mark.timeout(20)
def test_every_problem_of_a_decision_or_human_decision_names_it_by_its_constructor() -> None:
    from pi_workflows import DefinitionError, choice, human_decision

    with pytest.raises(DefinitionError) as caught:
        define_workflow(start_at="h", nodes=[
            human_decision("h", question="ok?", choices=[choice("yes"), choice("no")],
                           timeout=-1, status_detail=""),
            decision("d", question="q", choices=["a", "b"], timeout=-2, status_detail="")],
            edges=[edge("h", "d")])
    assert caught.value.problems == [
        "human_decision node 'h': timeout must be a positive number of seconds, got -1",
        "human_decision node 'h': status_detail is empty (leave it out instead)",
        "decision node 'd': timeout must be a positive number of seconds, got -2",
        "decision node 'd': status_detail is empty (leave it out instead)"]


@pytest.mark.timeout(20)
def test_a_decision_and_a_human_decision_routed_with_each_others_edge_are_told_which() -> None:
    from pi_workflows import DefinitionError, choice, human_decision, human_decision_edge

    with pytest.raises(DefinitionError) as caught:
        define_workflow(start_at="d", nodes=[
            decision("d", question="q", choices=["a", "b"]),
            human_decision("h", question="q", choices=[choice("y"), choice("n")]),
            compute("A", lambda ctx: 1), compute("B", lambda ctx: 1)],
            edges=[human_decision_edge("d", {"a": "h", "b": "A"}),
                   decision_edge("h", {"y": "A", "n": "B"})])
    assert sorted(caught.value.problems) == [
        "decision_edge from 'h': 'h' is a human_decision, not a decision(); route it with"
        " human_decision_edge() instead",
        "human_decision_edge from 'd': 'd' is a decision(), not a human_decision; route it"
        " with decision_edge() instead"]
