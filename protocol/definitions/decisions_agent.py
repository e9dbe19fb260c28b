"""Agent decisions: ``decision(...)`` and ``decision_edge(...)`` (issue 23, item 3).

Owns the decision node (an agent node whose prompt lists the choices, whose
``expected_output`` gives the choice field an enum and whose check refuses
any other value), the decision edge (a switch on the decision's field,
bound to it by ``define_workflow``: ``bind_decision_edges``) and their
definition rules, one sentence per mistake naming the node. The agent
executors need nothing new: a decision runs and is judged as any agent
node. Human decisions are another module's. Imports
``protocol.definitions.graph`` only.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .graph import (
    DEFAULT,
    AgentNode,
    AnyEdge,
    Node,
    NodeContext,
    SwitchEdge,
    Text,
    Timeout,
    _field,
    resolve_value,
)

DEFAULT_FIELD = "route"
_FIELD = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"  # one key of the output (compiled on first use)


class _Prompt:
    """A decision's prompt: the question, the choices, the author's own text."""

    def __init__(self, question: Text, choices: tuple[str, ...], field: str,
                 extra: Text | None) -> None:
        self.question, self.choices, self.field, self.extra = question, choices, field, extra

    def __call__(self, ctx: NodeContext) -> str:
        lines = [str(resolve_value(self.question, ctx)).strip(), ""]
        if self.extra is not None:
            lines += [str(resolve_value(self.extra, ctx)).strip(), ""]
        lines.append("Decide on exactly one of these choices:")
        lines += [f"- {choice}" for choice in self.choices]
        lines += ["", f"Submit an object whose {self.field!r} field is the choice, written"
                  " exactly as above (any other value is refused); you may add a short"
                  " 'reason'."]
        return "\n".join(lines)


class _Check:
    """A decision's ``validate``: the choice field holds one of the choices."""

    def __init__(self, choices: tuple[str, ...], field: str) -> None:
        self.choices, self.field = choices, field

    def __call__(self, output: Any, ctx: NodeContext) -> str | None:
        value = output.get(self.field) if isinstance(output, Mapping) else None
        if isinstance(value, str) and value in self.choices:
            return None
        return (f"{self.field!r} must be exactly one of "
                + ", ".join(repr(c) for c in self.choices))


@dataclass(frozen=True)
class DecisionNode(AgentNode):
    """An agent node that picks one of ``choices`` into its output's ``field``."""

    question: Text = ""
    choices: tuple[str, ...] = ()
    field: str = DEFAULT_FIELD
    extra_prompt: Text | None = None

    def snapshot_extra(self) -> dict[str, Any]:
        """What the digest covers beyond an agent node's fields (the prompt is a function)."""
        return {"decision": {"question": _field(self.question), "choices": list(self.choices),
                             "field": self.field, "prompt": _field(self.extra_prompt)}}


@dataclass(frozen=True)
class DecisionEdge(SwitchEdge):
    """A switch on a decision's choice field, one case per choice (no default)."""


def _schema(choices: tuple[str, ...], field: str) -> dict[str, Any]:
    return {"type": "object", "required": [field],
            "properties": {field: {"type": "string", "enum": list(choices)},
                           "reason": {"type": "string"}}}


def decision(
    id: str, *, question: Text, choices: Sequence[str], field: str = DEFAULT_FIELD,
    prompt: Text | None = None, timeout: Timeout = DEFAULT, status_detail: Text | None = None,
) -> DecisionNode:
    """An agent node that decides: its output's ``field`` is one of ``choices``.

    ``prompt`` (text or fn(ctx)) adds context after the question; route on the
    choice with ``decision_edge``.
    """
    kept = tuple(choices) if isinstance(choices, list | tuple) else choices
    listed = kept if isinstance(kept, tuple) and all(isinstance(c, str) for c in kept) else ()
    return DecisionNode(
        id, _Prompt(question, listed, field, prompt), _schema(listed, field),
        _Check(listed, field), timeout, status_detail,
        question=question, choices=kept, field=field, extra_prompt=prompt)  # type: ignore[arg-type]


def decision_edge(id: str, cases: Mapping[str, str]) -> DecisionEdge:
    """Route on decision ``id``'s choice: ``{choice: target node}``, one case per choice."""
    kept = dict(cases) if isinstance(cases, Mapping) else cases
    return DecisionEdge(id, f"$.{DEFAULT_FIELD}", kept)  # type: ignore[arg-type]


def bind_decision_edges(nodes: object, edges: Any) -> Any:
    """``edges`` with each decision edge switching on its decision's own field."""
    if not isinstance(nodes, list | tuple) or not isinstance(edges, list | tuple):
        return edges
    fields = {n.id: n.field for n in nodes
              if isinstance(n, DecisionNode) and isinstance(n.field, str)}
    return [dataclasses.replace(e, on=f"$.{fields[e.source]}")
            if isinstance(e, DecisionEdge) and e.source in fields else e for e in edges]


def decision_problems(node: Node) -> list[str]:
    """Problems with a decision node's own fields ([] for any other node)."""
    if not isinstance(node, DecisionNode):
        return []
    where = f"decision node {node.id!r}"
    out: list[str] = []
    question = node.question
    if not callable(question) and not (isinstance(question, str) and question.strip()):
        out.append(f"{where}: question must be non-empty text or a callable of ctx")
    if not (isinstance(node.field, str) and re.match(_FIELD, node.field)):
        out.append(f"{where}: field {node.field!r} must be one key (letters, digits, '_' or"
                   " '-', starting with a letter or '_')")
    choices = node.choices
    if not isinstance(choices, tuple):
        out.append(f"{where}: choices must be a list of text, got {type(choices).__name__}")
        return out
    if not choices:
        out.append(f"{where}: choices is empty; give at least two")
    seen: set[str] = set()
    for index, choice in enumerate(choices):
        if not isinstance(choice, str) or not choice.strip():
            out.append(f"{where}: choices[{index}] is {choice!r}; each choice is non-empty text")
        elif choice in seen:
            out.append(f"{where}: choice {choice!r} is listed more than once")
        else:
            seen.add(choice)
    if len(choices) == 1:
        out.append(f"{where}: choices has only {choices[0]!r}; a decision needs at least two")
    return out


def decision_edge_problems(item: DecisionEdge, nodes: Mapping[str, Node]) -> list[str]:
    """Problems with a decision edge: its source, and one case per choice exactly."""
    where = f"decision_edge from {item.source!r}"
    source = nodes.get(item.source) if isinstance(item.source, str) else None
    out: list[str] = []
    if not isinstance(item.cases, Mapping):
        return [f"{where}: cases must be a dict of choice to target node,"
                f" got {type(item.cases).__name__}"]
    for key, target in item.cases.items():
        if not isinstance(target, str) or target not in nodes:
            out.append(f"{where}: case {key!r} targets {target!r}, which is not a node")
    if source is None:
        return out  # the graph rules say the source is not a node
    if source.kind == "checkpoint" and hasattr(source, "choices"):  # a human_decision()
        out.append(f"{where}: {item.source!r} is a human_decision, not a decision();"
                   " route it with human_decision_edge() instead")
        return out
    if not isinstance(source, DecisionNode):
        article = "an" if source.kind[:1] in "aeiou" else "a"
        out.append(f"{where}: {item.source!r} is {article} {source.kind} node, not a"
                   " decision(); route it with switch() instead")
        return out
    choices = list(dict.fromkeys(c for c in source.choices if isinstance(c, str) and c.strip())
                   ) if isinstance(source.choices, tuple) else []
    for choice in choices:
        if choice not in item.cases:
            out.append(f"{where}: no case for choice {choice!r}; every choice needs one")
    for key in item.cases:
        if key not in choices:
            out.append(f"{where}: case {key!r} is not one of the choices of {item.source!r}"
                       f" ({', '.join(map(repr, choices))})")
    return out


def is_decision_edge(item: AnyEdge) -> bool:
    return isinstance(item, DecisionEdge)
