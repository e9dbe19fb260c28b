"""Building a workflow: ``define_workflow``, the one entry point authors call.

Owns turning what an author passed (nodes, edges, options) into a
``Workflow`` and refusing it with every problem at once. It sits above both
the model and the rules so neither has to know the other's caller; a
definition with ``include`` nodes is compiled here into one flat graph
(``protocol.definitions.compose``, children found by
``protocol.definitions.resolve``), and a decision_edge is bound to its
decision's field (``decisions_agent``). Imports ``protocol.definitions.graph``,
``compose``, ``decisions_agent``, ``resolve`` and ``validation``; must not
import ``worker`` or ``supervisor``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .compose import Composition, compose
from .decisions_agent import bind_decision_edges
from .graph import (
    DEFAULT_MAX_STEPS,
    DEFAULT_TIMEOUT_S,
    NODE_TYPES,
    AnyEdge,
    DefinitionError,
    Edge,
    IncludeNode,
    Node,
    SwitchEdge,
    Workflow,
)
from .resolve import resolve_all
from .validation import is_node_name, workflow_problems


def define_workflow(
    *, name: str | None = None, start_at: str, nodes: Sequence[Node],
    edges: Sequence[AnyEdge] = (), input: Callable[[Any], Any] | None = None,
    max_steps: int = DEFAULT_MAX_STEPS, timeout: float | None = DEFAULT_TIMEOUT_S,
    description: str = "",
    presentation_prompt: str | Callable[[Any], Any] | None = None,
    title: str | Callable[[Any], Any] | None = None,
    exits: Mapping[str, str] | None = None,
) -> Workflow:
    """Build and validate a workflow; raises ``DefinitionError`` listing every problem.

    ``presentation_prompt`` (text, or a function of the final state returning
    text, given 30 s): after a run of a session ends completed or waiting, the
    session's model is asked for one turn about its result with it.
    ``exits`` (``{"name": "node"}``) are what a workflow that includes this one
    routes on; ``include(...)`` nodes are compiled into one flat graph.
    """
    node_list = list(nodes) if isinstance(nodes, list | tuple) else nodes
    edge_list = list(edges) if isinstance(edges, list | tuple) else edges
    edge_list = bind_decision_edges(node_list, edge_list)  # a decision_edge reads its field
    by_id: dict[str, Node] = {}
    if isinstance(node_list, list):
        for node in node_list:
            node_id = getattr(node, "id", None)
            if isinstance(node, NODE_TYPES) and isinstance(node_id, str):
                by_id.setdefault(node_id, node)
    composed: Composition | None = None
    flat_edges = list(edge_list) if isinstance(edge_list, list) else []
    if isinstance(node_list, list) and any(isinstance(n, IncludeNode) for n in node_list):
        composed = compose(node_list, edge_list, resolve_all(node_list), is_node_name)
        by_id = _in_place(node_list, composed, by_id)
        flat_edges = [*(e for e in composed.kept_edges if isinstance(e, Edge | SwitchEdge)),
                      *composed.edges]
    workflow = Workflow(
        name=name, start_at=start_at, nodes=by_id, edges=tuple(flat_edges),
        input=input, max_steps=max_steps, timeout=timeout, description=description,
        presentation_prompt=presentation_prompt, title=title,
        exits=dict(exits) if isinstance(exits, Mapping) else {},
        includes=tuple(composed.includes) if composed is not None else (),
    )
    if exits is not None and not isinstance(exits, Mapping):
        object.__setattr__(workflow, "exits", exits)  # for the message; never returned
    problems = workflow_problems(workflow, raw_nodes=node_list, raw_edges=edge_list,
                                 composed=composed)
    if problems:
        raise DefinitionError(problems)
    return workflow


def _in_place(node_list: list[Any], composed: Composition, by_id: dict[str, Node],
              ) -> dict[str, Node]:
    """The flat nodes in the author's order, each include's where it stood."""
    out: dict[str, Node] = {}
    for node in node_list:
        if isinstance(node, IncludeNode) and isinstance(node.id, str):
            mine = (node.id, node.id + "/", node.id + ".")
            for made in composed.nodes:
                if made.id == mine[0] or made.id.startswith(mine[1:]):
                    out.setdefault(made.id, made)
        elif getattr(node, "id", None) in by_id:
            out.setdefault(node.id, by_id[node.id])
    return out
