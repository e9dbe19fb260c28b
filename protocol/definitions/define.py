"""Building a workflow: ``define_workflow``, the one entry point authors call.

Owns turning what an author passed (nodes, edges, options) into a
``Workflow`` and refusing it with every problem at once. It sits above both
the model and the rules so neither has to know the other's caller. Imports
``protocol.definitions.graph``, ``protocol.definitions.validation`` and
``decisions_agent`` (a decision_edge is bound to its decision's field here);
must not import ``worker`` or ``supervisor``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .decisions_agent import bind_decision_edges
from .graph import (
    DEFAULT_MAX_STEPS,
    DEFAULT_TIMEOUT_S,
    NODE_TYPES,
    AnyEdge,
    DefinitionError,
    Node,
    Workflow,
)
from .validation import workflow_problems


def define_workflow(
    *, name: str | None = None, start_at: str, nodes: Sequence[Node],
    edges: Sequence[AnyEdge] = (), input: Callable[[Any], Any] | None = None,
    max_steps: int = DEFAULT_MAX_STEPS, timeout: float | None = DEFAULT_TIMEOUT_S,
    description: str = "",
    presentation_prompt: str | Callable[[Any], Any] | None = None,
    title: str | Callable[[Any], Any] | None = None,
) -> Workflow:
    """Build and validate a workflow; raises ``DefinitionError`` listing every problem.

    ``presentation_prompt`` (text, or a function of the final state returning
    text, given 30 s): after a run of a session ends completed or waiting, the
    session's model is asked for one turn about its result with it.
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
    workflow = Workflow(
        name=name, start_at=start_at, nodes=by_id,
        edges=tuple(edge_list) if isinstance(edge_list, list) else (),
        input=input, max_steps=max_steps, timeout=timeout, description=description,
        presentation_prompt=presentation_prompt, title=title,
    )
    problems = workflow_problems(workflow, raw_nodes=node_list, raw_edges=edge_list)
    if problems:
        raise DefinitionError(problems)
    return workflow
