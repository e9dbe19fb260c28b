"""Running a composed graph: mount entries and exits, the child's view, mount step counts.

Owns what the engine does differently inside an ``include``: the entry node
(the child's input, ``include_entered``) and exit nodes (``{exit, output}``,
``include_exited``), each one fenced transition that is not a step; the
context a child's callables see (its input, its outputs and results by its
own ids, ``ctx.mount``); and each mount's ``max_steps`` per invocation
(``state.mountSteps``, reset at its entry). Imports ``protocol`` and worker
helpers; never the supervisor.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from types import MappingProxyType
from typing import Any, Protocol

from ..protocol.definitions.compose import SEP, enclosing_mounts, local_id, mount_of
from ..protocol.definitions.graph import (
    DEFAULT,
    MountNode,
    NodeContext,
    Workflow,
    resolve_value,
)
from ..protocol.definitions.routing import RoutingError, next_node
from ..protocol.definitions.values import OutputError, check_output
from ..protocol.limits import safe_error_message
from ..protocol.runstate import RunState
from ..protocol.states import Outcome
from .control import Control
from .nodes import NodeOutcome, Watch, error_outcome, run_callable

OK = {"outcome": Outcome.OK}


class Engine(Protocol):
    """What passing a mount node needs of the engine (worker.engine.Engine)."""

    workflow: Workflow
    state: RunState
    control: Control
    park_grace_s: float
    stop_grace_s: float
    monotonic: Callable[[], float]

    def _context(self, node_id: str, attempt: str, stop: threading.Event) -> NodeContext: ...
    def _settle(self, node_id: str, attempt: str, outcome: NodeOutcome) -> None: ...
    def _transition(self, event_type: str, payload: dict[str, Any], changes: RunState, *,
                    node_id: str | None = None,
                    merge: dict[str, dict[str, Any]] | None = None) -> None: ...


def scoped(state: RunState, ctx: NodeContext) -> NodeContext:
    """``ctx`` as the node's own workflow sees it (unchanged at the top level)."""
    mount = mount_of(ctx.node_id)
    if mount is None:
        return ctx
    prefix = mount + SEP
    n = len(prefix)
    outputs = {k[n:]: v for k, v in state["outputs"].items() if k.startswith(prefix)}
    results = {k[n:]: v for k, v in state["results"].items() if k.startswith(prefix)}
    return dataclasses.replace(
        ctx, node_id=local_id(ctx.node_id), input=state["outputs"].get(mount),
        outputs=MappingProxyType(outputs), results=MappingProxyType(results), mount=mount)


def steps_refused(workflow: Workflow, state: RunState, node_id: str) -> str | None:
    """Why ``node_id`` may not start: a mount around it used up its ``max_steps``."""
    counts = state.get("mountSteps") or {}
    for mount in enclosing_mounts(node_id):
        entry = workflow.nodes.get(mount)
        limit = entry.max_steps if isinstance(entry, MountNode) else None
        if limit is not None and int(counts.get(mount, 0)) >= limit:
            return (f"include {mount!r} reached its max_steps={limit} before node"
                    f" {node_id!r}")
    return None


def counted(state: RunState, node_id: str) -> RunState:
    """The projection change a started node makes to its mounts' step counts."""
    mounts = enclosing_mounts(node_id)
    if not mounts:
        return {}
    counts = dict(state.get("mountSteps") or {})
    for mount in mounts:
        counts[mount] = int(counts.get(mount, 0)) + 1
    return {"mountSteps": counts}


def _without(state: RunState, mount: str) -> dict[str, int]:
    counts = dict(state.get("mountSteps") or {})
    return {k: v for k, v in counts.items() if k != mount and not k.startswith(mount + SEP)}


def _route(engine: Engine, node: MountNode, value: Any) -> tuple[str | None, Any]:
    try:
        nxt = next_node(engine.workflow, node.id, value, OK)
    except RoutingError as exc:
        return None, {"type": "run_failed",
                      "error": {"code": "routing_failed",
                                "message": safe_error_message(exc.message)}}
    return nxt, None if nxt is not None else {"type": "run_completed"}


def _child_input(engine: Engine, node: MountNode) -> NodeOutcome:
    stop = threading.Event()
    ctx = scoped(engine.state, engine._context(node.id, f"{node.id}-entry", stop))

    def compute() -> Any:
        raw = resolve_value(node.input, ctx)
        if node.parse is None:
            return raw
        try:
            return node.parse(raw)
        except Exception as exc:
            raise ValueError(f"the input function of {node.workflow or 'the child'!r}"
                             f" refused the include's input: {type(exc).__name__}: {exc}"
                             ) from None

    # The include's input runs in the including workflow, on its default timeout.
    timeout_s = engine.workflow.timeout if node.timeout is DEFAULT else node.timeout
    if callable(timeout_s):  # never: a compiled entry holds a number or None
        timeout_s = None
    watch = Watch(engine.control, stop, timeout_s, effectful=False,
                  park_grace_s=engine.park_grace_s, stop_grace_s=engine.stop_grace_s,
                  monotonic=engine.monotonic)
    try:
        outcome = run_callable(compute, watch, timeout_s)
    except Exception as exc:
        return error_outcome(exc)
    if outcome.outcome == Outcome.OK:
        try:
            return NodeOutcome(Outcome.OK, output=check_output(node.id, outcome.output))
        except OutputError as exc:
            return NodeOutcome(Outcome.FAILED, error_code="output_invalid",
                               error=safe_error_message(exc.message))
    return outcome


def step_mount(engine: Engine, node: MountNode) -> None:
    """Pass an entry or exit node: one transition, not a step."""
    if node.exit is None:
        outcome = _child_input(engine, node)
        if outcome.outcome != Outcome.OK:
            if outcome.outcome == Outcome.CANCELLED and engine.control.park_requested \
                    and not engine.control.cancel_requested:
                return  # parked: the entry is passed again on resume
            engine._settle(node.id, f"{node.id}-entry", outcome)
            return
        value = outcome.output
        event, payload = "include_entered", {"mount": node.mount, "workflow": node.workflow}
        counts = {**_without(engine.state, node.mount), node.mount: 0}
    else:
        source = node.source_node or ""
        value = {"exit": node.exit, "output": engine.state["outputs"].get(source)}
        event, payload = "include_exited", {"mount": node.mount, "exit": node.exit}
        counts = _without(engine.state, node.mount)
    nxt, pending = _route(engine, node, value)
    engine._transition(event, {**payload, "next": nxt}, {
        "currentNode": nxt, "currentAttempt": None, "lastNode": node.id,
        "pendingEnd": pending, "answeredNode": None,
        "mountSteps": counts},
        node_id=node.id, merge={"outputs": {node.id: value}, "results": {node.id: OK}})
