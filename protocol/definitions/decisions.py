"""Human decisions: a checkpoint that asks a typed question (issue 23, item 3).

Owns ``human_decision``, ``choice``, ``text_input`` and
``human_decision_edge`` (their dataclasses and constructors), the rules
``validate`` applies to them and building the *request* a waiting run
records (the question, the audience and the valid answers, as JSON).
Checking an answer (``protocol.definitions.requests.decide``) reads only the
recorded request, never the definition, so an answer is judged by what was
asked. Imports ``protocol.definitions.graph`` and ``.requests``; must not
import ``worker`` or ``supervisor``.

The answer a human decision gets, which is its output in the continuation
(and ``ctx.answer``), is an object: ``{"choice": LABEL, "by": "person"}``,
with ``"input": VALUE`` when the chosen ``choice`` carries a fixed value, or
``"text": TEXT`` for a ``text_input``; the host's ``on_timeout`` answer says
``"by": "timeout"``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from .graph import (
    CheckpointNode,
    Node,
    NodeContext,
    SwitchEdge,
    Text,
    Timeout,
    _field,
    resolve_value,
)
from .requests import MAX_TEXT_CHARS, REQUEST_KIND

LABEL_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"
LABEL_RULE = "use 1-64 letters, digits, '_' or '-', starting with a letter"
DEFAULT_MIN_TEXT = 1
DEFAULT_MAX_TEXT = 2000
MAX_ANSWERS = 32
ON_CHOICE = "$.choice"


@dataclass(frozen=True)
class Choice:
    """One answer a person may pick: its label, and an optional fixed value it carries."""

    label: str
    input: Any = None
    description: str | None = None


@dataclass(frozen=True)
class TextInput:
    """An answer a person types: ``name`` is its label, the text is bounded."""

    name: str
    prompt: str
    min_length: int = DEFAULT_MIN_TEXT
    max_length: int = DEFAULT_MAX_TEXT

    @property
    def label(self) -> str:
        return self.name


Answer: TypeAlias = Choice | TextInput


@dataclass(frozen=True)
class HumanDecisionNode(CheckpointNode):
    """A checkpoint whose waiting state carries a typed request (its kind stays ``checkpoint``)."""

    question: Text = ""
    audience: Text | None = None
    choices: tuple[Any, ...] = ()
    on_timeout: str | None = None

    def snapshot_extra(self) -> dict[str, Any]:
        answers = [_answer_snapshot(a) for a in self.choices]
        return {**super().snapshot_extra(), "humanDecision": {
            "question": _field(self.question), "audience": _field(self.audience),
            "choices": answers, "onTimeout": self.on_timeout}}


@dataclass(frozen=True)
class HumanDecisionEdge(SwitchEdge):
    """After a human decision, the node named by the chosen label (every label has one)."""

    snapshot_type: ClassVar[str] = "humanDecisionEdge"


def _answer_snapshot(item: object) -> Any:
    if isinstance(item, Choice):
        return {"label": item.label, "input": _field(item.input),
                "description": item.description}
    if isinstance(item, TextInput):
        return {"textInput": item.name, "prompt": item.prompt, "minLength": item.min_length,
                "maxLength": item.max_length}
    return repr(item)


# --- constructors (they never raise: ``define_workflow`` reports every problem) ---


def choice(label: str, input: Any = None, description: str | None = None) -> Choice:
    """An answer of a human decision; ``input`` is a fixed JSON value the answer carries."""
    return Choice(label, input, description)


def text_input(name: str, prompt: str, *, min_length: int = DEFAULT_MIN_TEXT,
               max_length: int = DEFAULT_MAX_TEXT) -> TextInput:
    """An answer a person types (``answer RUN NAME TEXT...``), bounded in characters."""
    return TextInput(name, prompt, min_length, max_length)


def human_decision(
    id: str, *, question: Text, audience: Text | None = None, choices: Sequence[Answer],
    on_timeout: str | None = None, timeout: Timeout = None, summary: Text | None = None,
    run: Callable[[NodeContext], Any] | None = None, status_detail: Text | None = None,
) -> HumanDecisionNode:
    """A checkpoint asking ``question`` of ``audience``; only ``choices`` are valid answers.

    ``on_timeout`` (a choice's label): once ``timeout`` seconds pass unanswered,
    the host answers with that choice. Without it the timeout is not used.
    """
    items = tuple(choices) if isinstance(choices, list | tuple) else choices
    return HumanDecisionNode(id, summary, timeout, status_detail, run, question=question,
                             audience=audience, choices=items,  # type: ignore[arg-type]
                             on_timeout=on_timeout)


def human_decision_edge(id: str, cases: Mapping[str, str]) -> HumanDecisionEdge:
    """Route after human decision ``id`` on the chosen label: ``{label: node}``, every label."""
    table: Mapping[Any, str] = dict(cases) if isinstance(cases, Mapping) else cases
    return HumanDecisionEdge(id, ON_CHOICE, table)


# --- validate ------------------------------------------------------------------


def _text(value: object, where: str, what: str, *, optional: bool = False) -> str | None:
    if (optional and value is None) or callable(value):
        return None
    if not isinstance(value, str):
        return f"{where}: {what} must be a string or a callable of ctx, got {type(value).__name__}"
    return None if value.strip() else f"{where}: {what} is empty"


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text_input_problems(item: TextInput, where: str) -> list[str]:
    out: list[str] = []
    if not isinstance(item.prompt, str) or not item.prompt.strip():
        out.append(f"{where}: text_input {item.name!r} needs a prompt (text)")
    low, high = item.min_length, item.max_length
    if not _int(low) or low < 0:
        out.append(f"{where}: text_input {item.name!r}: min_length must be an integer >= 0,"
                   f" got {low!r}")
    if not _int(high) or not 1 <= high <= MAX_TEXT_CHARS:
        out.append(f"{where}: text_input {item.name!r}: max_length must be an integer from 1"
                   f" to {MAX_TEXT_CHARS:,}, got {high!r}")
    elif _int(low) and low > high:
        out.append(f"{where}: text_input {item.name!r}: min_length {low} is more than"
                   f" max_length {high}")
    return out


def _answers_problems(node: HumanDecisionNode, where: str) -> tuple[list[str], list[Any]]:
    items = node.choices
    if not isinstance(items, tuple) or not items:
        return [f"{where}: choices must be a non-empty list of choice() and text_input()"], []
    if len(items) > MAX_ANSWERS:
        return [f"{where}: choices has {len(items)} answers; at most {MAX_ANSWERS}"], []
    out: list[str] = []
    seen: dict[str, str] = {}
    for index, item in enumerate(items):
        if not isinstance(item, Choice | TextInput):
            out.append(f"{where}: choices[{index}] is not a choice() or text_input()"
                       f" (got {type(item).__name__})")
            continue
        label = item.label
        if not isinstance(label, str) or not re.match(LABEL_PATTERN, label):
            out.append(f"{where}: choices[{index}]: label {label!r} is invalid: {LABEL_RULE}")
            continue
        if label.lower() in seen:
            out.append(f"{where}: label {label!r} is used by more than one answer"
                       " (labels are compared ignoring case)")
            continue
        seen[label.lower()] = label
        if isinstance(item, Choice):
            if item.description is not None and not isinstance(item.description, str):
                out.append(f"{where}: choice {label!r}: description must be text")
            try:
                json.dumps(item.input, allow_nan=False)
            except (TypeError, ValueError) as exc:
                out.append(f"{where}: choice {label!r}: input is not JSON data ({exc})")
        else:
            out.extend(_text_input_problems(item, where))
    return out, [i for i in items if isinstance(i, Choice | TextInput)]


def checkpoint_problems(node: Node) -> list[str]:
    """Problems of a checkpoint's ``run=`` and, for a human decision, its request."""
    if not isinstance(node, CheckpointNode):
        return []
    out: list[str] = []
    run = node.run
    if run is not None and not callable(run):
        out.append(f"{_where(node)}: run must be a callable taking ctx, got {type(run).__name__}")
    if not isinstance(node, HumanDecisionNode):
        return out
    where = _where(node)
    out += [p for p in (_text(node.question, where, "question"),
                        _text(node.audience, where, "audience", optional=True)) if p]
    problems, answers = _answers_problems(node, where)
    out += problems
    label = node.on_timeout
    if label is not None:
        picked = next((a for a in answers if a.label == label), None)
        if not isinstance(label, str) or (answers and picked is None):
            names = ", ".join(a.label for a in answers)
            out.append(f"{where}: on_timeout {label!r} is not one of its choices ({names})")
        elif isinstance(picked, TextInput):
            out.append(f"{where}: on_timeout {label!r} names a text_input; a timeout can only"
                       " pick a choice()")
        if node.timeout is None:
            out.append(f"{where}: on_timeout needs timeout= (the seconds to wait for an"
                       " answer)")
    return out


def _where(node: CheckpointNode) -> str:
    kind = "human_decision" if isinstance(node, HumanDecisionNode) else "checkpoint"
    return f"{kind} node {node.id!r}"


def decision_edge_problems(edges: object, nodes: Mapping[str, Node]) -> list[str]:
    """``human_decision_edge``: a human decision's source, one case per label, no other."""
    out: list[str] = []
    for item in edges if isinstance(edges, list | tuple) else ():
        if not isinstance(item, HumanDecisionEdge) or not isinstance(item.cases, Mapping):
            continue
        where = f"human_decision_edge from {item.source!r}"
        source = nodes.get(item.source) if isinstance(item.source, str) else None
        if source is None:
            continue  # the graph rules name a missing source
        if not isinstance(source, HumanDecisionNode):
            # A decision() (an agent node with choices; its module imports this one).
            agent_decision = source.kind == "agent" and hasattr(source, "choices")
            article = "an" if source.kind[:1] in "aeiou" else "a"
            out.append(f"{where}: {item.source!r} is a decision(), not a human_decision;"
                       " route it with decision_edge() instead" if agent_decision else
                       f"{where}: {item.source!r} is {article} {source.kind} node, not a"
                       " human_decision; route it with edge() or switch()")
            continue
        labels = [a.label for a in source.choices if isinstance(a, Choice | TextInput)]
        for label in labels:
            if label not in item.cases:
                out.append(f"{where}: no case for choice {label!r} (every choice needs a"
                           " target node)")
        for key in item.cases:
            if key not in labels:
                out.append(f"{where}: case {key!r} is not a choice of {item.source!r}"
                           f" (its choices: {', '.join(labels)})")
    return out


# --- the request a waiting run records ----------------------------------------


def request_of(node: HumanDecisionNode, ctx: NodeContext, timeout_s: float | None,
               now_ms: int) -> dict[str, Any]:
    """The typed request of a waiting human decision (JSON), with its deadline if it has one."""
    question = resolve_value(node.question, ctx)
    audience = resolve_value(node.audience, ctx)
    answers: list[dict[str, Any]] = []
    for item in node.choices:
        if isinstance(item, TextInput):
            answers.append({"label": item.name, "text": {
                "prompt": item.prompt, "minLength": item.min_length,
                "maxLength": item.max_length}})
        else:
            entry: dict[str, Any] = {"label": item.label, "description": item.description}
            if item.input is not None:
                entry["input"] = item.input
            answers.append(entry)
    due = None
    if node.on_timeout is not None and timeout_s is not None and math.isfinite(timeout_s):
        due = now_ms + int(timeout_s * 1000)
    return {"kind": REQUEST_KIND, "question": str(question),
            "audience": None if audience is None else str(audience), "choices": answers,
            "onTimeout": node.on_timeout if due is not None else None, "dueAt": due}
