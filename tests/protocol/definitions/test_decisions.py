"""Human decisions in the definition model: constructors, validate, snapshot, answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pi_workflows import (
    DefinitionError,
    checkpoint,
    choice,
    compute,
    define_workflow,
    definition_digest,
    edge,
    human_decision,
    human_decision_edge,
    snapshot,
    switch,
    text_input,
)
from pi_workflows.protocol.definitions.decisions import (
    HumanDecisionEdge,
    HumanDecisionNode,
    request_of,
)
from pi_workflows.protocol.definitions.discovery import load_workflow_file
from pi_workflows.protocol.definitions.graph import CheckpointNode
from pi_workflows.protocol.definitions.requests import (
    AnswerRefused,
    answer_forms,
    decide,
    request_in,
)
from pi_workflows.protocol.definitions.routing import next_node

from tests.helpers.definitions import make_ctx

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "approve.workflow.py"
OK = {"outcome": "ok", "errorCode": None, "error": None}


def _ask(**over: Any) -> HumanDecisionNode:
    fields: dict[str, Any] = {
        "question": "Ship it?", "audience": "release managers",
        "choices": [choice("approve", input={"go": True}, description="ship"),
                    choice("reject"), text_input("other", "say why", max_length=10)],
        "on_timeout": "reject", "timeout": 60}
    fields.update(over)
    return human_decision("ask", **fields)


def _problems(node: Any, cases: Any = None, extra: list[Any] | None = None) -> list[str]:
    nodes = [node, compute("a", lambda c: 1), compute("b", lambda c: 2), *(extra or [])]
    edges = [human_decision_edge(node.id, cases if cases is not None else
                                 {"approve": "a", "reject": "b", "other": "b"})]
    with pytest.raises(DefinitionError) as err:
        define_workflow(start_at=node.id, nodes=nodes, edges=edges)
    return err.value.problems


def test_the_constructors_build_a_checkpoint_and_a_switch_on_the_choice() -> None:
    node = _ask()
    assert isinstance(node, CheckpointNode) and node.kind == "checkpoint"
    assert node.choices[0] == choice("approve", {"go": True}, "ship")
    assert node.choices[2].label == "other" and node.choices[2].min_length == 1
    route = human_decision_edge("ask", {"approve": "a"})
    assert isinstance(route, HumanDecisionEdge) and route.on == "$.choice"
    wf = define_workflow(start_at="ask", nodes=[node, compute("a", lambda c: 1),
                                                compute("b", lambda c: 2)],
                         edges=[human_decision_edge("ask", {"approve": "a", "reject": "b",
                                                            "other": "b"})])
    assert next_node(wf, "ask", {"choice": "other", "text": "x", "by": "person"}, OK) == "b"
    assert next_node(wf, "ask", {"choice": "approve", "by": "timeout"}, OK) == "a"


@pytest.mark.parametrize(("node", "cases", "expected"), [
    (_ask(question=""), None, "human_decision node 'ask': question is empty"),
    (_ask(audience=3), None,
     "human_decision node 'ask': audience must be a string or a callable of ctx, got int"),
    (_ask(choices=[]), {}, "human_decision node 'ask': choices must be a non-empty list of"
                           " choice() and text_input()"),
    (_ask(choices=["approve"], on_timeout=None), {},
     "human_decision node 'ask': choices[0] is not a choice() or text_input() (got str)"),
    (_ask(choices=[choice("ok go")], on_timeout=None), {},
     "human_decision node 'ask': choices[0]: label 'ok go' is invalid: use 1-64 letters,"
     " digits, '_' or '-', starting with a letter"),
    (_ask(choices=[choice("approve"), choice("Approve"), choice("reject"),
                   text_input("other", "p")]), None,
     "human_decision node 'ask': label 'Approve' is used by more than one answer (labels are"
     " compared ignoring case)"),
    (_ask(choices=[choice("approve", input={1, 2}), choice("reject"),
                   text_input("other", "p")]), None,
     "human_decision node 'ask': choice 'approve': input is not JSON data (Object of type set"
     " is not JSON serializable)"),
    (_ask(choices=[choice("approve"), choice("reject"), text_input("other", " ")]), None,
     "human_decision node 'ask': text_input 'other' needs a prompt (text)"),
    (_ask(choices=[choice("approve"), choice("reject"),
                   text_input("other", "p", min_length=5, max_length=4)]), None,
     "human_decision node 'ask': text_input 'other': min_length 5 is more than max_length 4"),
    (_ask(choices=[choice("approve"), choice("reject"),
                   text_input("other", "p", max_length=0)]), None,
     "human_decision node 'ask': text_input 'other': max_length must be an integer from 1 to"
     " 20,000, got 0"),
    (_ask(on_timeout="later"), None,
     "human_decision node 'ask': on_timeout 'later' is not one of its choices (approve,"
     " reject, other)"),
    (_ask(on_timeout="other"), None,
     "human_decision node 'ask': on_timeout 'other' names a text_input; a timeout can only"
     " pick a choice()"),
    (_ask(timeout=None), None,
     "human_decision node 'ask': on_timeout needs timeout= (the seconds to wait for an"
     " answer)"),
    (_ask(), {"approve": "a", "reject": "b"},
     "human_decision_edge from 'ask': no case for choice 'other' (every choice needs a target"
     " node)"),
    (_ask(), {"approve": "a", "reject": "b", "other": "b", "maybe": "a"},
     "human_decision_edge from 'ask': case 'maybe' is not a choice of 'ask' (its choices:"
     " approve, reject, other)"),
    (_ask(run="not callable"), None,
     "human_decision node 'ask': run must be a callable taking ctx, got str"),
])
def test_validate_names_the_node_and_the_field(node: Any, cases: Any, expected: str) -> None:
    assert expected in _problems(node, cases)


def test_a_human_decision_edge_must_leave_a_human_decision() -> None:
    with pytest.raises(DefinitionError) as err:
        define_workflow(start_at="ask", nodes=[checkpoint("ask"), compute("a", lambda c: 1)],
                        edges=[human_decision_edge("ask", {"yes": "a"})])
    assert err.value.problems == [
        "human_decision_edge from 'ask': 'ask' is a checkpoint node, not a human_decision;"
        " route it with edge() or switch()"]


def test_a_checkpoint_run_must_be_callable() -> None:
    with pytest.raises(DefinitionError) as err:
        define_workflow(start_at="ask", nodes=[checkpoint("ask", run=5)])  # type: ignore[arg-type]
    assert err.value.problems == ["checkpoint node 'ask': run must be a callable taking ctx,"
                                  " got int"]


def _one(ctx: Any) -> int:
    return 1


def test_definitions_without_the_feature_keep_their_digest() -> None:
    wf = define_workflow(name="plain", start_at="a",
                         nodes=[compute("a", _one), checkpoint("b", summary="go?"),
                                compute("c", _one)],
                         edges=[edge("a", "b"), switch("b", "$.x", {1: "c"})])
    shot = snapshot(wf)
    assert shot["nodes"][1] == {"id": "b", "kind": "checkpoint", "timeout": "default",
                                "summary": "go?"}
    assert shot["edges"][1]["type"] == "switch"
    # The digest of this definition before human decisions existed (commit 8edf8c5).
    assert definition_digest(wf) == (
        "sha256:253cf752aaa1c30f4bdb2e0f18307e39284bd7bb217ca002a4627f337ab54943")
    with_run = define_workflow(start_at="b", nodes=[checkpoint("b", run=_one)])
    assert snapshot(with_run)["nodes"][0]["run"] == {"callable": "_one"}


def test_a_decision_is_in_the_snapshot_and_changes_the_digest() -> None:
    def wf(label: str) -> Any:
        node = _ask(choices=[choice("approve"), choice(label), text_input("other", "p")],
                    on_timeout=label)
        return define_workflow(start_at="ask", nodes=[node, compute("a", lambda c: 1),
                                                      compute("b", lambda c: 1)],
                               edges=[human_decision_edge("ask", {"approve": "a", label: "b",
                                                                  "other": "b"})])
    shot = snapshot(wf("reject"))
    assert shot["nodes"][0]["humanDecision"]["onTimeout"] == "reject"
    assert shot["edges"][0]["type"] == "humanDecisionEdge"
    assert definition_digest(wf("reject")) != definition_digest(wf("decline"))


# ---- the request and the answers ---------------------------------------------


def _request(node: HumanDecisionNode | None = None, timeout_s: float | None = 60) -> Any:
    ctx = make_ctx()
    return request_of(node or _ask(), ctx, timeout_s, 1_000_000)


def test_the_request_holds_the_question_the_answers_and_the_deadline() -> None:
    request = _request(_ask(question=lambda ctx: f"Ship {ctx.run_id}?"))
    assert request == {
        "kind": "human_decision", "question": f"Ship {make_ctx().run_id}?",
        "audience": "release managers",
        "choices": [{"label": "approve", "description": "ship", "input": {"go": True}},
                    {"label": "reject", "description": None},
                    {"label": "other", "text": {"prompt": "say why", "minLength": 1,
                                                "maxLength": 10}}],
        "onTimeout": "reject", "dueAt": 1_060_000}
    assert request_in({"summary": None, "request": request}) == request
    assert request_in({"summary": "plain"}) is None
    assert answer_forms(request) == ["approve", "reject", "other TEXT (1-10 characters)"]
    untimed = _request(_ask(on_timeout=None, timeout=None), None)
    assert untimed["onTimeout"] is None and untimed["dueAt"] is None


@pytest.mark.parametrize(("given", "answer"), [
    ("approve", {"choice": "approve", "input": {"go": True}, "by": "person"}),
    ("  REJECT ", {"choice": "reject", "by": "person"}),
    ("other because", {"choice": "other", "text": "because", "by": "person"}),
    ("other: two words", {"choice": "other", "text": "two words", "by": "person"}),
    ("other:x", {"choice": "other", "text": "x", "by": "person"}),
    ({"choice": "other", "text": "ten chars!"}, {"choice": "other", "text": "ten chars!",
                                                 "by": "person"}),
    ({"choice": "reject"}, {"choice": "reject", "by": "person"}),
])
def test_decide_shapes_a_valid_answer(given: Any, answer: Any) -> None:
    assert decide(_request(), given, "r1") == answer


@pytest.mark.parametrize(("given", "why"), [
    ("maybe", "that is not one of the answers"),
    ("", "the answer is empty"),
    (None, "that is not an answer to this decision"),
    ({"choice": "approve", "by": "timeout"},
     'as JSON, an answer is {"choice": LABEL} or {"choice": LABEL, "text": TEXT}, nothing else'),
    ({"choice": "reject", "input": {"why": "x"}},
     'as JSON, an answer is {"choice": LABEL} or {"choice": LABEL, "text": TEXT}, nothing else'),
    ({"choice": "other", "text": 5},
     'as JSON, an answer is {"choice": LABEL} or {"choice": LABEL, "text": TEXT}, nothing else'),
    ("approve now", "answer 'approve' takes no text"),
    ("other", "the text of 'other' must be 1-10 characters (it has 0)"),
    ("other eleven chars", "the text of 'other' must be 1-10 characters (it has 12)"),
])
def test_decide_refuses_with_one_line_naming_the_valid_answers(given: Any, why: str) -> None:
    with pytest.raises(AnswerRefused) as err:
        decide(_request(), given, "r1")
    assert err.value.message == (f"{why}; run r1 takes one of: approve, reject,"
                                 " other TEXT (1-10 characters)")
    assert err.value.code == "answer_invalid" and err.value.exit_code == 2


def test_the_timeout_answer_says_so() -> None:
    assert decide(_request(), {"choice": "reject"}, "r1", by="timeout") == {
        "choice": "reject", "by": "timeout"}


def test_the_example_validates_and_routes_on_each_label() -> None:
    loaded = load_workflow_file(EXAMPLE)
    wf = loaded.workflow
    assert loaded.name == "approve" and wf.description
    node = wf.nodes["review"]
    assert isinstance(node, HumanDecisionNode) and node.on_timeout == "drop"
    for label, target in (("publish", "publish"), ("drop", "dropped"),
                          ("revise", "revision")):
        assert next_node(wf, "review", {"choice": label, "by": "person"}, OK) == target
