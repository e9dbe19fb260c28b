"""The workflow definition model and the constructors authors call.

Owns: node and edge dataclasses, ``Workflow``, ``NodeContext`` (built by the
engine, handed to author callables), the ``DEFAULT`` timeout sentinel,
``DefinitionError``, the node and edge constructors and the pure helpers over
a definition (``outgoing``, ``resolve_value``, ``resolve_timeout``,
``snapshot``, ``definition_digest``). A leaf of the definition modules:
checking (``protocol.definitions.validation``), routing (``protocol.definitions.routing``) and
building (``protocol.definitions.define``) import it, never the reverse. Imports only
``protocol.errors``, ``protocol.jsonenc`` and ``protocol.definitions.progress``
(``parse_line``, what ``shell``'s ``updates`` holds); must not import
``worker`` or ``supervisor``.
"""

from __future__ import annotations

import enum
import hashlib
import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeAlias

from ..errors import UsageError
from ..jsonenc import canonical_json
from .progress import LineUpdates, line_updates_snapshot

SNAPSHOT_SCHEMA = "pi-workflows.workflow.v1"
DEFAULT_TIMEOUT_S = 900.0
DEFAULT_MAX_STEPS = 100
# ``presentation_prompt``: its text, and how long its function may take (issue 22, item 7).
MAX_PRESENTATION_CHARS = 50_000
PRESENTATION_TIMEOUT_S = 30.0
# ``checkpoint(run=)``: how long the function computing the waiting output may take.
CHECKPOINT_RUN_TIMEOUT_S = 30.0
# ``title``: its text, and how long its function may take (issue 23, item 2).
MAX_TITLE_CHARS = 200
TITLE_TIMEOUT_S = 30.0
DEFAULT_MAX_OUTPUT_BYTES = 1_048_576
NOTIFY_KINDS = ("progress", "final")


class DefaultType(enum.Enum):
    """Type of the ``DEFAULT`` sentinel: "use the workflow's default timeout"."""

    DEFAULT = "DEFAULT"

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT = DefaultType.DEFAULT


class DefinitionError(UsageError):
    """A workflow definition is invalid; ``problems`` lists every problem found."""

    code = "workflow_invalid"

    def __init__(self, problems: Sequence[str], *, code: str | None = None) -> None:
        self.problems = list(problems) or ["workflow definition is invalid"]
        if len(self.problems) == 1:
            message = self.problems[0]
        else:
            message = f"{len(self.problems)} problems: " + "; ".join(self.problems)
        super().__init__(message, code=code)


@dataclass(frozen=True)
class RunInfo:
    """``ctx.state``: what a node may read about its run (read-only)."""

    run_id: str
    title: str | None = None
    steps: int = 0  # nodes started so far in the run, this one included
    started_at: str | None = None  # ISO 8601, UTC: when the run (its chain's first) started


def _no_updates(data: Any) -> None:
    raise RuntimeError("publish_update is only available while a compute, action or shell"
                       " node runs")


@dataclass(frozen=True)
class NodeContext:
    """What a node's callables see. The engine builds one per node attempt."""

    run_id: str
    node_id: str
    attempt_id: str
    input: Any
    outputs: Mapping[str, Any]
    results: Mapping[str, dict[str, Any]]
    cancel: threading.Event
    project_dir: Path
    # The attempt of this node that was interrupted (a crash, a park) and is
    # being redone by this one; None for a first attempt.
    interrupted_attempt: str | None = None
    state: RunInfo | None = None
    # The answer of the checkpoint this run continues from (None in a run that
    # is not a continuation); the checkpoint's output is the same value.
    answer: Any = None
    # Where ``publish_update`` sends a structured progress update (issue 23, item 4).
    updates: Callable[[Any], None] = _no_updates
    # Inside an included workflow: the mount path ("review", "outer/inner"); the
    # ids above are then the child's own (protocol.definitions.compose).
    mount: str | None = None

    def cancelled(self) -> bool:
        """True once the node should stop (cancel, park or timeout)."""
        return self.cancel.is_set()

    def publish_update(self, data: Any) -> None:
        """Publish a progress update (a JSON object, or text) for watchers."""
        self.updates(data)


Scalar: TypeAlias = str | int | float | bool | None
TimeoutFn: TypeAlias = Callable[[NodeContext], float | None]
Timeout: TypeAlias = float | DefaultType | TimeoutFn | None
Text: TypeAlias = str | Callable[[NodeContext], str]
Command: TypeAlias = str | Sequence[str] | Callable[[NodeContext], str | Sequence[str]]
PathArg: TypeAlias = str | os.PathLike[str]
Cwd: TypeAlias = PathArg | Callable[[NodeContext], PathArg] | None
Env: TypeAlias = Mapping[str, str] | Callable[[NodeContext], Mapping[str, str]] | None
Stdin: TypeAlias = str | Callable[[NodeContext], str] | None
# None accepts, a str refuses, ``Replace(value)`` (protocol.definitions.verdicts) replaces.
Validator: TypeAlias = Callable[[Any, NodeContext], object]


@dataclass(frozen=True)
class ComputeNode:
    """Pure computation: ``fn(ctx)`` returns the node's JSON output."""

    id: str
    fn: Callable[[NodeContext], Any]
    timeout: Timeout = DEFAULT
    # Shown while the node runs (status, watch, the live view); text or fn(ctx).
    status_detail: Text | None = None
    kind: str = field(default="compute", init=False)


@dataclass(frozen=True)
class ActionNode:
    """A Python function with an external side effect, run as a guarded effect."""

    id: str
    fn: Callable[[NodeContext], Any]
    idempotent: bool = False
    timeout: Timeout = DEFAULT
    # Shown while the node runs (status, watch, the live view); text or fn(ctx).
    status_detail: Text | None = None
    kind: str = field(default="action", init=False)


@dataclass(frozen=True)
class ShellNode:
    """A command run as a guarded effect; output ``{exitCode, stdout, stderr}``."""

    id: str
    command: Command
    cwd: Cwd = None
    env: Env = None
    stdin: Stdin = None
    timeout: Timeout = DEFAULT
    allow_nonzero_exit: bool = False
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    idempotent: bool = False
    status_detail: Text | None = None
    # ``parse(result, ctx)``: the node's output from the shell result; the effect
    # keeps the raw result, so a resume parses the recorded one again.
    parse: Callable[[Any, NodeContext], Any] | None = None
    updates: LineUpdates | None = None  # ``parse_line(fn)``: output lines as updates
    kind: str = field(default="shell", init=False)


@dataclass(frozen=True)
class AgentNode:
    """A conversation step in a Pi agent; it submits its output with a tool."""

    id: str
    prompt: Text
    expected_output: Mapping[str, Any] | None = None
    validate: Validator | None = None
    timeout: Timeout = DEFAULT
    # Shown while the node runs (status, watch, the live view); text or fn(ctx).
    status_detail: Text | None = None
    kind: str = field(default="agent", init=False)


@dataclass(frozen=True)
class NotifyNode:
    """A message for the watching session; output ``{message, kind}``."""

    id: str
    message: Text
    notify_kind: str = "progress"
    timeout: Timeout = DEFAULT
    # Shown while the node runs (status, watch, the live view); text or fn(ctx).
    status_detail: Text | None = None
    kind: str = field(default="notify", init=False)


@dataclass(frozen=True)
class CheckpointNode:
    """Ends the run ``waiting``; the answer is its output in the continuation."""

    id: str
    summary: Text | None = None
    timeout: Timeout = DEFAULT
    # Shown while the node runs (status, watch, the live view); text or fn(ctx).
    status_detail: Text | None = None
    # ``run(ctx)`` computes the waiting output's ``data`` (bounded, CHECKPOINT_RUN_TIMEOUT_S).
    run: Callable[[NodeContext], Any] | None = None
    kind: str = field(default="checkpoint", init=False)

    def snapshot_extra(self) -> dict[str, Any]:
        """Snapshot keys of optional fields, only when set (earlier digests stay)."""
        return {} if self.run is None else {"run": _field(self.run)}


@dataclass(frozen=True)
class IncludeNode:
    """``include(...)``: a whole workflow placed as a node; compiled away by ``define_workflow``."""

    id: str  # the mount name (``as_=``)
    child: Any  # a Workflow, a workflow name or a path
    input: Any = None  # a value, or fn(ctx) giving the child's raw input
    base: str | None = None  # the directory of the including file (a path is relative to it)
    kind: str = field(default="include", init=False)


@dataclass(frozen=True)
class MountNode:
    """An entry (``exit`` None; id = the mount path) or exit node (id ``mount.exit``) of a mount.

    Made by compilation, never by an author; neither counts as a step.
    """

    id: str
    mount: str
    exit: str | None = None
    input: Any = None  # entry: include(input=...)
    parse: Callable[[Any], Any] | None = None  # entry: the child's own ``input`` function
    max_steps: int = DEFAULT_MAX_STEPS  # entry: the child's, per invocation
    source_node: str | None = None  # exit: the flat id of the node whose output it carries
    workflow: str | None = None  # entry: the child's name
    timeout: Timeout = DEFAULT
    status_detail: Text | None = None
    kind: str = field(default="mount", init=False)


Node: TypeAlias = (ComputeNode | ActionNode | ShellNode | AgentNode | NotifyNode | CheckpointNode
                   | MountNode)
NODE_TYPES = (
    ComputeNode, ActionNode, ShellNode, AgentNode, NotifyNode, CheckpointNode,
)
EFFECT_KINDS = ("action", "shell")


@dataclass(frozen=True)
class Edge:
    """After ``source`` succeeds, run ``target``."""

    source: str
    target: str


@dataclass(frozen=True)
class SwitchEdge:
    """After ``source``, pick a target by the scalar value at path ``on``."""

    source: str
    on: str
    cases: Mapping[Scalar, str]
    default: str | None = None
    snapshot_type: ClassVar[str] = "switch"


AnyEdge: TypeAlias = Edge | SwitchEdge


@dataclass(frozen=True)
class Workflow:
    """A validated workflow definition (build it with ``define_workflow``)."""

    name: str | None
    start_at: str
    nodes: dict[str, Node]
    edges: tuple[AnyEdge, ...]
    input: Callable[[Any], Any] | None = None
    max_steps: int = DEFAULT_MAX_STEPS
    timeout: float | None = DEFAULT_TIMEOUT_S
    description: str = ""
    # Text, or a function of the final state (the run's ``state.json``) returning
    # text: after the run ends completed or waiting, its session's model is asked
    # for one turn about the result with it (worker/presentation.py).
    presentation_prompt: str | Callable[[Any], Any] | None = None
    # Text, or a function of the run input returning text (given TITLE_TIMEOUT_S):
    # resolved once when the run starts and shown wherever the run is listed.
    title: str | Callable[[Any], Any] | None = None
    # ``exits={"done": "node"}``: what an including workflow routes on; and every
    # file an include brought in (protocol.definitions.compose).
    exits: Mapping[str, str] = field(default_factory=dict)
    includes: tuple[IncludedFile, ...] = ()


@dataclass(frozen=True)
class IncludedFile:
    """A workflow file an include loaded: pinned in the run's manifest beside the parent's."""

    mount: str
    workflow: str | None
    path: str
    sha256: str


# --- constructors -------------------------------------------------------------
# They never raise: ``define_workflow`` (protocol.definitions.define) reports every problem at once.


def compute(
    id: str, fn: Callable[[NodeContext], Any], *, timeout: Timeout = DEFAULT,
    status_detail: Text | None = None,
) -> ComputeNode:
    """A node that computes its output from the context: ``fn(ctx) -> JSON value``."""
    return ComputeNode(id, fn, timeout, status_detail)


def action(
    id: str, fn: Callable[[NodeContext], Any], *, idempotent: bool = False,
    timeout: Timeout = DEFAULT, status_detail: Text | None = None,
) -> ActionNode:
    """A node whose function changes something outside the run (a guarded effect)."""
    return ActionNode(id, fn, idempotent, timeout, status_detail)


def shell(
    id: str, command: Command, *, cwd: Cwd = None, env: Env = None, stdin: Stdin = None,
    timeout: Timeout = DEFAULT, allow_nonzero_exit: bool = False,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES, idempotent: bool = False,
    status_detail: Text | None = None, parse: Callable[[Any, NodeContext], Any] | None = None,
    updates: LineUpdates | None = None,
) -> ShellNode:
    """A node that runs a command (str: ``/bin/sh -c``; list: argv) as a guarded effect.

    ``parse(result, ctx)`` shapes its output from ``{exitCode, stdout, stderr,
    truncated}``; ``updates=parse_line(fn)`` turns output lines into progress updates.
    """
    if isinstance(command, list | tuple):
        command = list(command)  # a private copy; argv stays a list
    return ShellNode(id, command, cwd, env, stdin, timeout, allow_nonzero_exit,
                     max_output_bytes, idempotent, status_detail, parse, updates)


def agent(
    id: str, prompt: Text, *, expected_output: Mapping[str, Any] | None = None,
    validate: Validator | None = None, timeout: Timeout = DEFAULT,
    status_detail: Text | None = None,
) -> AgentNode:
    """A node that asks a Pi agent to do the work and submit a structured output."""
    return AgentNode(id, prompt, expected_output, validate, timeout, status_detail)


def notify(id: str, message: Text, *, kind: str = "progress",
           status_detail: Text | None = None) -> NotifyNode:
    """A node that tells the watching session something (``progress`` or ``final``)."""
    return NotifyNode(id, message, kind, DEFAULT, status_detail)


def checkpoint(
    id: str, *, summary: Text | None = None, timeout: Timeout = DEFAULT,
    status_detail: Text | None = None, run: Callable[[NodeContext], Any] | None = None,
) -> CheckpointNode:
    """A node that stops the run ``waiting`` for a human answer.

    ``run(ctx)`` computes a JSON value shown beside the summary while it waits.
    """
    return CheckpointNode(id, summary, timeout, status_detail, run)


def edge(source: str, target: str) -> Edge:
    """An unconditional edge."""
    return Edge(source, target)


def switch(
    source: str, on: str, cases: Mapping[Scalar, str], default: str | None = None,
) -> SwitchEdge:
    """A branching edge on ``$.path`` / ``$output.path`` / ``$result.path``."""
    return SwitchEdge(source, on, dict(cases) if isinstance(cases, Mapping) else cases, default)


# --- helpers over a definition ------------------------------------------------


# id(edges) -> (edges, {source: first edge}); the tuple is kept so its id stays unique.
_OUTGOING: dict[int, tuple[tuple[AnyEdge, ...], dict[str, AnyEdge]]] = {}


def outgoing(workflow: Workflow, node_id: str) -> AnyEdge | None:
    """The one edge leaving ``node_id``, or None when the run ends after it.

    Indexed once per definition: a scan per step would make each step of a
    10,000-node workflow cost its length.
    """
    edges = workflow.edges
    cached = _OUTGOING.get(id(edges))
    if cached is None or cached[0] is not edges:
        index: dict[str, AnyEdge] = {}
        for candidate in edges:
            index.setdefault(candidate.source, candidate)
        if len(_OUTGOING) >= 64:  # a process that loads many definitions (tests)
            _OUTGOING.clear()
        cached = _OUTGOING[id(edges)] = (edges, index)
    return cached[1].get(node_id)


def resolve_value(value: Any, ctx: NodeContext) -> Any:
    """A field that may be a callable of the context: call it, else return it."""
    return value(ctx) if callable(value) else value


def resolve_timeout(node: Node, workflow: Workflow, ctx: NodeContext) -> float | None:
    """Seconds this node attempt may run, or None for no limit."""
    value: Any = node.timeout
    if value is DEFAULT:
        value = workflow.timeout
    if callable(value):
        value = value(ctx)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
        math.isfinite(value) and value > 0
    ):
        raise DefinitionError(
            [f"node {node.id!r}: timeout must be a positive number of seconds or None,"
             f" got {value!r}"]
        )
    return float(value)


def callable_ref(fn: object) -> dict[str, Any]:
    """How a function appears in a snapshot: its qualified name, never its code."""
    name = getattr(fn, "__qualname__", None)
    return {"callable": name if isinstance(name, str) and name else True}


def _field(value: Any) -> Any:
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if value is DEFAULT:
        return "default"
    if callable(value):
        return callable_ref(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Mapping):
        return {str(k): _field(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_field(v) for v in value]
    return repr(value)


def _node_snapshot(node: Node) -> dict[str, Any]:
    data: dict[str, Any] = {"id": node.id, "kind": node.kind, "timeout": _field(node.timeout)}
    if node.status_detail is not None:  # only when set: earlier definitions keep their digest
        data["statusDetail"] = _field(node.status_detail)
    if isinstance(node, ComputeNode):
        data["fn"] = _field(node.fn)
    elif isinstance(node, ActionNode):
        data.update(fn=_field(node.fn), idempotent=node.idempotent)
    elif isinstance(node, ShellNode):
        data.update(
            command=_field(node.command), cwd=_field(node.cwd), env=_field(node.env),
            stdin=_field(node.stdin), allowNonzeroExit=node.allow_nonzero_exit,
            maxOutputBytes=node.max_output_bytes, idempotent=node.idempotent,
        )
        if node.parse is not None:  # only when set: earlier definitions keep their digest
            data["parse"] = _field(node.parse)
        if isinstance(node.updates, LineUpdates):
            data["updates"] = line_updates_snapshot(node.updates, callable_ref)
        elif node.updates is not None:
            data["updates"] = _field(node.updates)
    elif isinstance(node, AgentNode):
        data.update(prompt=_field(node.prompt), expectedOutput=_field(node.expected_output),
                    validate=_field(node.validate))
    elif isinstance(node, NotifyNode):
        data.update(message=_field(node.message), notifyKind=node.notify_kind)
    elif isinstance(node, MountNode):
        data.update(mount=node.mount, exit=node.exit, input=_field(node.input),
                    parse=_field(node.parse), maxSteps=node.max_steps,
                    sourceNode=node.source_node, workflow=node.workflow)
    else:
        data["summary"] = _field(node.summary)
    extra = getattr(node, "snapshot_extra", None)  # a node kind built on these (a decision)
    if callable(extra):
        data.update(extra())
    return data


def _edge_snapshot(item: AnyEdge) -> dict[str, Any]:
    if isinstance(item, Edge):
        return {"type": "edge", "source": item.source, "target": item.target}
    return {
        "type": item.snapshot_type, "source": item.source, "on": item.on,
        "cases": [{"value": _field(k), "target": t} for k, t in item.cases.items()],
        "default": item.default,
    }


def snapshot(workflow: Workflow) -> dict[str, Any]:
    """A canonical JSON-able description of the definition (no code, only names)."""
    return {
        "schema": SNAPSHOT_SCHEMA,
        "name": workflow.name,
        "description": workflow.description,
        "startAt": workflow.start_at,
        "maxSteps": workflow.max_steps,
        "timeout": _field(workflow.timeout),
        "input": _field(workflow.input),
        "nodes": [_node_snapshot(node) for node in workflow.nodes.values()],
        "edges": [_edge_snapshot(item) for item in workflow.edges],
        # Only when set: every earlier definition keeps its digest.
        **({} if workflow.presentation_prompt is None
           else {"presentationPrompt": _field(workflow.presentation_prompt)}),
        **({} if workflow.title is None else {"title": _field(workflow.title)}),
        **({} if not workflow.exits else {"exits": dict(workflow.exits)}),
        # The sha256 of every included file: a changed child changes the digest.
        **({} if not workflow.includes else {"includes": [
            {"mount": f.mount, "workflow": f.workflow, "sha256": f.sha256}
            for f in workflow.includes]}),
    }


def definition_digest(workflow: Workflow) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``snapshot(workflow)``."""
    return "sha256:" + hashlib.sha256(canonical_json(snapshot(workflow)).encode()).hexdigest()
