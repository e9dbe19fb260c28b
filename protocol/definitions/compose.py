"""Composition: ``include`` and exits, compiled into one flat graph.

Owns the ``include`` and ``included_result`` constructors, the compilation
of an included workflow into the parent's graph (child nodes as
``mount/local``, an entry node ``mount`` and an exit node ``mount.exit`` per
exit, edges rewritten), the checks only a composition has (routing on exits,
exits of the child, where an edge may point) and the id helpers the engine
and views use (``mount_of``, ``local_id``, ``enclosing_mounts``). Loading a
child given by name or path is ``protocol.definitions.resolve``'s. Imports
only ``protocol.definitions.graph``; must not import ``worker`` or
``supervisor``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .graph import (
    DEFAULT,
    AnyEdge,
    Edge,
    IncludedFile,
    IncludeNode,
    MountNode,
    Node,
    SwitchEdge,
    Workflow,
    outgoing,
)

SEP = "/"  # mount/local
EXIT_SEP = "."  # mount.exit


def include(child: Any, *, input: Any = None, as_: str = "") -> IncludeNode:
    """Place a whole workflow (an object, a workflow name or a path) as node ``as_``.

    A path is taken relative to the file that calls ``include``. The parent
    routes on the child's exits as ``"<as_>.<exit>"``.
    """
    base = None
    frame = sys._getframe(1)
    caller = frame.f_globals.get("__file__")
    if isinstance(caller, str) and os.path.isabs(caller):
        base = os.path.dirname(caller)
    return IncludeNode(as_, child, input, base)


def included_result(child: Workflow | Collection[str], value: Any) -> dict[str, Any]:
    """``value`` if it is an ``{exit, output}`` of ``child``; else a clear ValueError.

    ``child`` is the included ``Workflow``, or its exit names (for a child
    included by name or path).
    """
    if isinstance(child, Workflow):
        name, exits = child.name or "the included workflow", sorted(child.exits)
    else:
        name, exits = "the included workflow", sorted(map(str, child))
    if not isinstance(value, Mapping) or set(value) != {"exit", "output"}:
        shape = type(value).__name__ if not isinstance(value, Mapping) else \
            "an object with keys " + ", ".join(sorted(map(str, value)))
        raise ValueError(f"not a result of {name!r}: expected an object with keys exit and"
                         f" output, got {shape}")
    if value["exit"] not in exits:
        raise ValueError(f"not a result of {name!r}: exit {value['exit']!r} is not one of"
                         f" its exits ({', '.join(exits) or 'none'})")
    try:
        json.dumps(value["output"], allow_nan=False)
    except (TypeError, ValueError):
        raise ValueError(f"not a result of {name!r}: its output is not JSON data") from None
    return dict(value)


# --- ids ------------------------------------------------------------------------


def mount_of(node_id: str) -> str | None:
    """The mount a flat node id lives in (``a/b/x`` -> ``a/b``), None at the top."""
    return node_id.rsplit(SEP, 1)[0] if SEP in node_id else None


def local_id(node_id: str) -> str:
    """The id a node has inside its own workflow (``a/b/x`` -> ``x``)."""
    return node_id.rsplit(SEP, 1)[-1]


def enclosing_mounts(node_id: str) -> list[str]:
    """Every mount around a node, outermost first (``a/b/x`` -> ``a``, ``a/b``)."""
    parts = node_id.split(SEP)[:-1]
    return [SEP.join(parts[: i + 1]) for i in range(len(parts))]


def is_compiled(node: Node) -> bool:
    """A node made by compilation (an entry, an exit, or a child's), not by the author."""
    return isinstance(node, MountNode) or SEP in node.id


# --- compilation ----------------------------------------------------------------


@dataclass
class Composition:
    """What compiling a parent's includes gave: the flat graph and its problems."""

    nodes: list[Node] = field(default_factory=list)  # compiled nodes only
    edges: list[AnyEdge] = field(default_factory=list)  # compiled edges only
    kept_edges: list[object] = field(default_factory=list)  # the author's, minus refused ones
    problems: list[str] = field(default_factory=list)
    includes: list[IncludedFile] = field(default_factory=list)


def _prefixed(node: Node, prefix: str, child: Workflow) -> Node:
    # A node on the default timeout keeps its own workflow's default, not the parent's.
    timeout = child.timeout if node.timeout is DEFAULT else node.timeout
    if isinstance(node, MountNode):
        return dataclasses.replace(
            node, id=prefix + node.id, mount=prefix + node.mount, timeout=timeout,
            source_node=None if node.source_node is None else prefix + node.source_node)
    return dataclasses.replace(node, id=prefix + node.id, timeout=timeout)


def _prefixed_edge(item: AnyEdge, prefix: str) -> AnyEdge:
    if isinstance(item, Edge):
        return Edge(prefix + item.source, prefix + item.target)
    return SwitchEdge(prefix + item.source, item.on,
                      {k: prefix + t for k, t in item.cases.items()},
                      None if item.default is None else prefix + item.default)


def compile_mount(mount: str, child: Workflow, marker: IncludeNode, out: Composition) -> None:
    """Add ``child``'s graph under ``mount``: entry, prefixed nodes and edges, exits."""
    prefix = mount + SEP
    out.nodes.append(MountNode(mount, mount, input=marker.input, parse=child.input,
                               max_steps=child.max_steps, workflow=child.name))
    out.nodes.extend(_prefixed(node, prefix, child) for node in child.nodes.values())
    out.edges.append(Edge(mount, prefix + child.start_at))
    out.edges.extend(_prefixed_edge(item, prefix) for item in child.edges)
    for name, local in child.exits.items():
        exit_id = f"{mount}{EXIT_SEP}{name}"
        out.nodes.append(MountNode(exit_id, mount, exit=name, source_node=prefix + local))
        out.edges.append(Edge(prefix + local, exit_id))
    out.includes.extend(dataclasses.replace(f, mount=prefix + f.mount) for f in child.includes)


def child_problems(mount: str, child: Workflow) -> list[str]:
    """What keeps a valid workflow from being included: no exits, an end without one."""
    where = f"include {mount!r}"
    name = child.name or "the included workflow"
    if not child.exits:
        return [f"{where}: workflow {name!r} declares no exits; define it with"
                " exits={\"done\": \"<node>\"} to include it"]
    exit_nodes = set(child.exits.values())
    return [f"{where}: node {node_id!r} of workflow {name!r} ends it without an exit;"
            " name it in that workflow's exits= or give it an outgoing edge"
            for node_id, node in child.nodes.items()
            if not isinstance(node, MountNode) and node_id not in exit_nodes
            and outgoing(child, node_id) is None]


def _targets(item: AnyEdge) -> list[object]:
    if isinstance(item, Edge):
        return [item.target]
    cases = list(item.cases.values()) if isinstance(item.cases, Mapping) else []
    return [*cases, *([item.default] if item.default is not None else [])]


def edge_problems(raw_edges: object, children: Mapping[str, Workflow | None],
                  out: Composition) -> None:
    """Check the author's edges against the mounts; keep the ones the graph check gets."""
    if not isinstance(raw_edges, list | tuple):
        out.kept_edges = raw_edges  # type: ignore[assignment]  # the graph check names it
        return
    routed: set[str] = set()
    for item in raw_edges:
        if not isinstance(item, Edge | SwitchEdge):
            out.kept_edges.append(item)
            continue
        label = (f"edge {item.source!r} -> {item.target!r}" if isinstance(item, Edge)
                 else f"switch from {item.source!r}")
        problem = _endpoint_problem(item, label, children)
        if problem is not None:
            if problem:
                out.problems.append(problem)
            continue
        if isinstance(item.source, str):
            routed.add(item.source)
        out.kept_edges.append(item)
    for mount, child in children.items():
        for name in (child.exits if child is not None else {}):
            exit_id = f"{mount}{EXIT_SEP}{name}"
            if exit_id not in routed:
                out.problems.append(
                    f"include {mount!r}: exit {name!r} is not routed; add"
                    f" edge({exit_id!r}, ...) or a switch from {exit_id!r}")


def _endpoint_problem(item: AnyEdge, label: str,
                      children: Mapping[str, Workflow | None]) -> str | None:
    def exits_of(mount: str) -> str:
        child = children.get(mount)
        names = sorted(child.exits) if child is not None else []
        return ", ".join(f"{mount}{EXIT_SEP}{n}" for n in names) or "none"

    source = item.source
    if isinstance(source, str):
        if source in children:
            return (f"{label}: {source!r} is an include; route on its exits"
                    f" ({exits_of(source)}), not on the mount itself")
        mount, dot, name = source.partition(EXIT_SEP)
        child = children.get(mount)
        if dot and mount in children and child is None:
            return ""  # the include did not load: that is its problem, not this edge's
        if dot and mount in children and child is not None and name not in child.exits:
            return (f"{label}: include {mount!r} has no exit {name!r} (its exits:"
                    f" {exits_of(mount)})")
        if SEP in source and source.split(SEP, 1)[0] in children:
            return (f"{label}: {source!r} is inside an include; route from its exits, not"
                    " from its nodes")
    for target in _targets(item):
        if not isinstance(target, str):
            continue
        mount, dot, _ = target.partition(EXIT_SEP)
        if dot and mount in children:
            return (f"{label}: targets {target!r}, an exit of include {mount!r}; an edge only"
                    f" leaves an exit (target {mount!r} to enter the include)")
        if SEP in target and target.split(SEP, 1)[0] in children:
            return (f"{label}: targets {target!r}, a node inside an include; target the"
                    " include itself to enter it")
    return None


def compose(raw_nodes: Sequence[object], raw_edges: object,
            resolved: Mapping[str, tuple[Workflow | None, list[IncludedFile], str | None]],
            valid_id: Callable[[str], bool]) -> Composition:
    """Compile every include of ``raw_nodes``; ``resolved`` is each mount's loaded child.

    An include whose id breaks the name rule is left out (the rules name it).
    """
    out = Composition()
    children: dict[str, Workflow | None] = {}
    for node in raw_nodes:
        if not isinstance(node, IncludeNode) or not isinstance(node.id, str) \
                or not valid_id(node.id):
            continue
        child, files, problem = resolved.get(node.id, (None, [], None))
        if problem:
            out.problems.append(problem)
        if not (node.input is None or callable(node.input)):
            try:
                json.dumps(node.input, allow_nan=False)
            except (TypeError, ValueError):
                out.problems.append(f"include {node.id!r}: input must be JSON data or a"
                                    " callable of ctx")
        children[node.id] = child
        if child is None:
            continue
        out.problems.extend(child_problems(node.id, child))
        out.includes.extend(files)
        compile_mount(node.id, child, node, out)
    edge_problems(raw_edges, children, out)
    return out
