"""Checking workflow definitions.

Owns: the rules a definition must follow (one specific sentence per problem,
every problem reported at once) and the workflow and node name rules. The
run-time checks on input and outputs live in ``protocol.definitions.values``; building a
workflow (``define_workflow``) in ``protocol.definitions.define``, which calls these
rules. Imports ``protocol.definitions.graph``, ``protocol.definitions.routing``,
``protocol.definitions.compose`` (what a compiled include looks like),
the rules of decisions (``decisions_agent``, ``decisions``: human ones) and of
shown text (``shown``) and ``protocol.commands`` (the reserved command words);
must not import
``worker`` or ``supervisor``.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..commands import COMMAND_WORDS
from .compose import Composition, is_compiled
from .decisions import HumanDecisionNode, checkpoint_problems
from .decisions import decision_edge_problems as human_edge_problems
from .decisions_agent import DecisionEdge, DecisionNode, decision_edge_problems, decision_problems
from .graph import (
    MAX_PRESENTATION_CHARS,
    NODE_TYPES,
    NOTIFY_KINDS,
    DefaultType,
    DefinitionError,
    Edge,
    IncludeNode,
    Node,
    SwitchEdge,
    Workflow,
)
from .progress import STREAMS, LineUpdates
from .routing import is_scalar, parse_path
from .shown import status_detail_problem, title_problem

NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"  # compiled on first use
NAME_RULE = "use 1-64 letters, digits, '_' or '-', starting with a letter"
_NODE_HELP = "build nodes with compute(), action(), shell(), agent(), notify() or checkpoint()"


def name_problems(name: object) -> list[str]:
    """Problems with a workflow name (pattern and reserved words)."""
    if not isinstance(name, str):
        return [f"workflow name must be a string, got {type(name).__name__}"]
    if not re.match(NAME_PATTERN, name):
        return [f"workflow name {name!r} is invalid: {NAME_RULE}"]
    if name.lower() in COMMAND_WORDS:
        return [f"workflow name {name!r} is reserved (it is a pi-workflows command word);"
                " choose another name"]
    return []


def is_node_name(node_id: object) -> bool:
    """True when ``node_id`` follows the node name rule."""
    return isinstance(node_id, str) and re.match(NAME_PATTERN, node_id) is not None


def _timeout_problem(value: object, where: str, *, allow_default: bool) -> str | None:
    if value is None or callable(value) or (allow_default and isinstance(value, DefaultType)):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        allowed = "DEFAULT, None, " if allow_default else "None, "
        return (f"{where}: timeout must be {allowed}a positive number of seconds or a"
                f" callable, got {type(value).__name__}")
    if not (math.isfinite(value) and value > 0):
        return f"{where}: timeout must be a positive number of seconds, got {value!r}"
    return None


def _text_problem(value: object, where: str, what: str, *, optional: bool = False) -> str | None:
    if (optional and value is None) or callable(value):
        return None
    if not isinstance(value, str):
        return f"{where}: {what} must be a string or a callable of ctx, got {type(value).__name__}"
    if not value.strip():
        return f"{where}: {what} is empty"
    return None


def _flag_problem(value: object, where: str, what: str) -> str | None:
    if isinstance(value, bool):
        return None
    return f"{where}: {what} must be True or False, got {type(value).__name__}"


def _json_problem(value: object) -> str | None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


def _shell_problems(node: Any, where: str) -> list[str]:
    out: list[str] = []
    cmd = node.command
    if isinstance(cmd, str):
        if not cmd.strip():
            out.append(f"{where}: command is empty")
    elif isinstance(cmd, list | tuple):
        if not cmd:
            out.append(f"{where}: command is an empty list; give at least the program")
        elif not all(isinstance(arg, str) for arg in cmd):
            out.append(f"{where}: command list items must all be strings")
        elif not cmd[0]:
            out.append(f"{where}: command list starts with an empty program name")
    elif not callable(cmd):
        out.append(f"{where}: command must be a string, a list of strings or a callable of"
                   f" ctx, got {type(cmd).__name__}")
    if not (node.cwd is None or callable(node.cwd) or isinstance(node.cwd, str | os.PathLike)):
        out.append(f"{where}: cwd must be a path, None or a callable of ctx,"
                   f" got {type(node.cwd).__name__}")
    env = node.env
    if not (env is None or callable(env)) and not (
        isinstance(env, Mapping)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        out.append(f"{where}: env must be a dict of string to string, None or a callable of ctx")
    if not (node.stdin is None or callable(node.stdin) or isinstance(node.stdin, str)):
        out.append(f"{where}: stdin must be a string, None or a callable of ctx,"
                   f" got {type(node.stdin).__name__}")
    size = node.max_output_bytes
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        out.append(f"{where}: max_output_bytes must be a positive integer, got {size!r}")
    for flag, what in ((node.allow_nonzero_exit, "allow_nonzero_exit"),
                       (node.idempotent, "idempotent")):
        out.append(_flag_problem(flag, where, what) or "")
    out.extend(_progress_problems(node, where))
    return [p for p in out if p]


def _progress_problems(node: Any, where: str) -> list[str]:
    """``parse=`` and ``updates=`` of a shell node (issue 23, item 4)."""
    out: list[str] = []
    if node.parse is not None and not callable(node.parse):
        out.append(f"{where}: parse must be a callable (result, ctx) -> output,"
                   f" got {type(node.parse).__name__}")
    updates = node.updates
    if updates is None:
        return out
    if not isinstance(updates, LineUpdates):
        return [*out, f"{where}: updates must be parse_line(fn, streams=[...]),"
                      f" got {type(updates).__name__}"]
    if not callable(updates.fn):
        out.append(f"{where}: updates: parse_line's fn must be a callable (line) -> update"
                   f" or None, got {type(updates.fn).__name__}")
    streams = updates.streams
    if not isinstance(streams, tuple) or not streams or any(s not in STREAMS for s in streams):
        out.append(f"{where}: updates: parse_line's streams must be a non-empty list of"
                   f" 'stdout' and 'stderr', got {streams!r}")
    elif len(set(streams)) != len(streams):
        out.append(f"{where}: updates: parse_line's streams name a stream twice: {streams!r}")
    return out


def node_problems(node: Node) -> list[str]:
    """Problems with one node's own fields (not its place in the graph)."""
    # Named by the constructor the author called: a human_decision is a checkpoint and
    # a decision an agent node, but their messages say human_decision and decision.
    label = "human_decision" if isinstance(node, HumanDecisionNode) else \
        "decision" if isinstance(node, DecisionNode) else node.kind
    where = f"{label} node {node.id!r}"
    out: list[str | None] = [_timeout_problem(node.timeout, where, allow_default=True)]
    kind = node.kind
    if kind in ("compute", "action"):
        fn = getattr(node, "fn", None)
        if not callable(fn):
            out.append(f"{where}: fn must be a callable taking ctx, got {type(fn).__name__}")
        if kind == "action":
            out.append(_flag_problem(getattr(node, "idempotent", None), where, "idempotent"))
    elif kind == "shell":
        out.extend(_shell_problems(node, where))
    elif kind == "agent":
        out.append(_text_problem(getattr(node, "prompt", None), where, "prompt"))
        expected = getattr(node, "expected_output", None)
        if expected is not None:
            if not isinstance(expected, Mapping):
                out.append(f"{where}: expected_output must be a dict (a JSON-schema-like"
                           f" description), got {type(expected).__name__}")
            elif (reason := _json_problem(expected)) is not None:
                out.append(f"{where}: expected_output is not JSON-serialisable ({reason})")
        check = getattr(node, "validate", None)
        if check is not None and not callable(check):
            out.append(f"{where}: validate must be a callable (output, ctx) -> None | str,"
                       f" got {type(check).__name__}")
    elif kind == "notify":
        out.append(_text_problem(getattr(node, "message", None), where, "message"))
        notify_kind = getattr(node, "notify_kind", None)
        if notify_kind not in NOTIFY_KINDS:
            out.append(f"{where}: kind must be 'progress' or 'final', got {notify_kind!r}")
    elif kind == "checkpoint":
        out.append(_text_problem(getattr(node, "summary", None), where, "summary",
                                 optional=True))
        out.extend(checkpoint_problems(node))
    out.append(status_detail_problem(node, where))
    out.extend(decision_problems(node))
    return [p for p in out if p]


def _collect_nodes(raw_nodes: object, problems: list[str],
                   compiled: Sequence[Node] = ()) -> dict[str, Node]:
    nodes: dict[str, Node] = {}
    if not isinstance(raw_nodes, list | tuple):
        problems.append(f"nodes must be a list of nodes, got {type(raw_nodes).__name__}")
        return nodes
    if not raw_nodes:
        problems.append("the workflow has no nodes")
    for index, node in enumerate(raw_nodes):
        if not isinstance(node, (*NODE_TYPES, IncludeNode)):
            problems.append(f"nodes[{index}] is not a node (got {type(node).__name__});"
                            f" {_NODE_HELP}")
            continue
        node_id = node.id
        if isinstance(node, IncludeNode) and not (
                isinstance(node_id, str) and re.match(NAME_PATTERN, node_id)):
            problems.append(_mount_name_problem(index, node))
            continue
        if not isinstance(node_id, str) or not re.match(NAME_PATTERN, node_id):
            problems.append(f"nodes[{index}]: node id {node_id!r} is invalid: {NAME_RULE}")
            continue
        if node_id in nodes:
            problems.append(f"node id {node_id!r} is used by more than one node")
            continue
        nodes[node_id] = node  # type: ignore[assignment]  # an include stands for its entry
        if not isinstance(node, IncludeNode):  # an include's own checks: compose
            problems.extend(node_problems(node))
    for node in compiled:  # checked where its workflow was defined
        nodes.setdefault(node.id, node)
    return nodes


def _mount_name_problem(index: int, node: IncludeNode) -> str:
    child = node.child if isinstance(node.child, str) else \
        getattr(node.child, "name", None) or type(node.child).__name__
    where = f"nodes[{index}]: include of {child!r}"
    if node.id == "":
        return (f"{where}: as_ is required: the mount's node id, such as"
                f" include({child!r}, as_=\"review\")")
    return f"{where}: as_ {node.id!r} is invalid: {NAME_RULE}"


def _switch_problems(item: SwitchEdge, nodes: Mapping[str, Node]) -> list[str]:
    if isinstance(item, DecisionEdge):
        return decision_edge_problems(item, nodes)
    where = f"switch from {item.source!r}"
    out: list[str] = []
    try:
        path = parse_path(item.on)
    except ValueError as exc:
        out.append(f"{where}: on {item.on!r} {exc}")
    else:
        source = nodes.get(item.source)
        if path.segments[:1] == ("exitCode",) and source is not None and source.kind != "shell":
            out.append(f"{where}: on {item.on!r} reads exitCode, which only shell nodes have")
    if not isinstance(item.cases, Mapping):
        out.append(f"{where}: cases must be a dict of value to target node,"
                   f" got {type(item.cases).__name__}")
        return out
    if not item.cases and item.default is None:
        out.append(f"{where}: needs at least one case or a default")
    for key, target in item.cases.items():
        if not is_scalar(key):
            out.append(f"{where}: case {key!r} is not a scalar (string, number, boolean or"
                       " None)")
        elif isinstance(key, float) and not math.isfinite(key):
            out.append(f"{where}: case {key!r} is not a finite number")
        if not isinstance(target, str) or target not in nodes:
            out.append(f"{where}: case {key!r} targets {target!r}, which is not a node")
    if item.default is not None and (
        not isinstance(item.default, str) or item.default not in nodes
    ):
        out.append(f"{where}: default targets {item.default!r}, which is not a node")
    return out


def _targets(item: Edge | SwitchEdge) -> list[object]:
    if isinstance(item, Edge):
        return [item.target]
    cases = list(item.cases.values()) if isinstance(item.cases, Mapping) else []
    return [*cases, *([item.default] if item.default is not None else [])]


def _graph_problems(
    raw_edges: object, nodes: Mapping[str, Node], start_at: object, problems: list[str],
) -> None:
    if not isinstance(raw_edges, list | tuple):
        problems.append(f"edges must be a list of edges, got {type(raw_edges).__name__}")
        raw_edges = []
    leaving: dict[str, int] = {}
    graph: dict[str, list[str]] = {}
    for index, item in enumerate(raw_edges):
        if not isinstance(item, Edge | SwitchEdge):
            problems.append(f"edges[{index}] is not an edge (got {type(item).__name__});"
                            " build edges with edge() or switch()")
            continue
        if isinstance(item, Edge):
            label = f"edge {item.source!r} -> {item.target!r}"
            if not isinstance(item.target, str) or item.target not in nodes:
                problems.append(f"{label}: target {item.target!r} is not a node")
        else:
            label = f"switch from {item.source!r}"
            problems.extend(_switch_problems(item, nodes))
        if not isinstance(item.source, str) or item.source not in nodes:
            problems.append(f"{label}: source {item.source!r} is not a node")
            continue
        leaving[item.source] = leaving.get(item.source, 0) + 1
        graph.setdefault(item.source, []).extend(
            t for t in _targets(item) if isinstance(t, str) and t in nodes)
    for source, count in leaving.items():
        if count > 1:
            problems.append(f"node {source!r} has {count} outgoing edges; a node has at most"
                            " one (use switch() to branch)")
    if not isinstance(start_at, str) or start_at not in nodes:
        if nodes:
            problems.append(f"start_at {start_at!r} is not a node of this workflow")
        return
    seen, todo = {start_at}, [start_at]
    while todo:
        for nxt in graph.get(todo.pop(), []):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    for node_id in nodes:
        if node_id not in seen:
            problems.append(f"node {node_id!r} is not reachable from start node {start_at!r}")


def workflow_problems(
    workflow: Workflow, *, raw_nodes: object = None, raw_edges: object = None,
    composed: Composition | None = None,
) -> list[str]:
    """Every problem with a definition, one specific sentence each ([] = valid).

    ``raw_nodes``/``raw_edges`` are what the author passed (they may hold
    duplicates and non-nodes that a ``Workflow`` cannot); by default the
    workflow's own nodes and edges are checked.
    """
    problems: list[str] = []
    if workflow.name is not None:
        problems.extend(name_problems(workflow.name))
    built = list(workflow.nodes.values())
    # A built composition holds compiled nodes (``mount/local``, entries, exits).
    compiled = [n for n in built if is_compiled(n)] if raw_nodes is None else []
    nodes_in = [n for n in built if not is_compiled(n)] if raw_nodes is None else raw_nodes
    if composed is not None:
        compiled = composed.nodes
        problems.extend(composed.problems)
    nodes = _collect_nodes(nodes_in, problems, compiled)
    edges_in = list(workflow.edges) if raw_edges is None else raw_edges
    if composed is not None and isinstance(composed.kept_edges, list):
        edges_in = [*composed.kept_edges, *composed.edges]
    elif composed is not None:
        edges_in = composed.kept_edges
    if composed is not None and composed.problems:
        # A refused edge into or out of an include leaves nodes behind it unreached:
        # a consequence of the problem already named, not one more.
        graph: list[str] = []
        _graph_problems(edges_in, nodes, workflow.start_at, graph)
        problems.extend(p for p in graph if " is not reachable from start node " not in p)
    else:
        _graph_problems(edges_in, nodes, workflow.start_at, problems)
    problems.extend(exit_problems(workflow.exits, nodes, edges_in))
    problems.extend(human_edge_problems(edges_in, nodes))
    steps = workflow.max_steps
    if isinstance(steps, bool) or not isinstance(steps, int) or steps <= 0:
        problems.append(f"max_steps must be a positive integer, got {steps!r}")
    problem = _timeout_problem(workflow.timeout, "workflow", allow_default=False)
    if problem is None and callable(workflow.timeout):
        problem = "workflow: timeout must be None or a positive number of seconds, not a callable"
    if problem:
        problems.append(problem)
    if workflow.input is not None and not callable(workflow.input):
        problems.append("input must be a callable that parses the raw run input,"
                        f" got {type(workflow.input).__name__}")
    if not isinstance(workflow.description, str):
        problems.append(f"description must be a string, got {type(workflow.description).__name__}")
    problem = _presentation_problem(workflow.presentation_prompt)
    if problem:
        problems.append(problem)
    problem = title_problem(workflow.title)
    if problem:
        problems.append(problem)
    return problems


def exit_problems(exits: object, nodes: Mapping[str, Node], edges: object) -> list[str]:
    """Problems with ``exits={"name": "node"}``: names, the nodes they name, their edges."""
    if isinstance(exits, Mapping) and not exits:
        return []
    if not isinstance(exits, Mapping):
        return [f"exits must be a dict of exit name to node id, got {type(exits).__name__}"]
    sources = {item.source for item in (edges if isinstance(edges, list | tuple) else [])
               if isinstance(item, Edge | SwitchEdge)}
    out: list[str] = []
    named: dict[str, str] = {}
    for name, target in exits.items():
        if not isinstance(name, str) or not re.match(NAME_PATTERN, name):
            out.append(f"exit name {name!r} is invalid: {NAME_RULE}")
            continue
        node = nodes.get(target) if isinstance(target, str) else None
        if node is None or is_compiled(node):
            out.append(f"exit {name!r} names {target!r}, which is not a node of this workflow")
        elif isinstance(node, IncludeNode):
            out.append(f"exit {name!r} names include {target!r}; an exit names one of this"
                       " workflow's own nodes (route the include's exit to one)")
        elif target in sources:
            out.append(f"exit {name!r} names node {target!r}, which has an outgoing edge; an"
                       " exit node ends its branch (remove the edge or name another node)")
        elif target in named:
            out.append(f"exits {named[target]!r} and {name!r} both name node {target!r};"
                       " give each exit its own node")
        else:
            named[target] = name
    return out


def _presentation_problem(prompt: object) -> str | None:
    if prompt is None or callable(prompt):
        return None
    if not isinstance(prompt, str):
        return ("presentation_prompt must be text or a function of the final state,"
                f" got {type(prompt).__name__}")
    if not prompt.strip():
        return "presentation_prompt must not be empty (leave it out instead)"
    if len(prompt) > MAX_PRESENTATION_CHARS:
        return (f"presentation_prompt is longer than {MAX_PRESENTATION_CHARS:,} characters"
                f" ({len(prompt):,})")
    return None


def validate_workflow(workflow: Workflow) -> Workflow:
    """Raise ``DefinitionError`` (every problem) unless ``workflow`` is valid."""
    problems = workflow_problems(workflow)
    if problems:
        raise DefinitionError(problems)
    return workflow
