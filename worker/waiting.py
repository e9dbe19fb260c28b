"""What a checkpoint records when its run stops ``waiting`` (issue 23, items 3 and 5).

Owns computing a checkpoint's waiting output: ``{"summary": TEXT|None}``,
with ``"data"`` (what ``checkpoint(run=fn)`` returned: ``fn(ctx)`` runs as a
compute node's function does, in a thread under a ``Watch`` bounded by
``CHECKPOINT_RUN_TIMEOUT_S``) and, for a human decision, ``"request"`` (the
question, the audience, the valid answers and, with ``on_timeout``, the
deadline ``dueAt`` in ms since the epoch, on the wall clock: it must mean the
same to a host that starts after this worker is gone). Returns a failed
``NodeOutcome`` instead when any of that fails. Imports ``protocol`` and
``worker.nodes``; writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..protocol.definitions.decisions import HumanDecisionNode, request_of
from ..protocol.definitions.graph import (
    CHECKPOINT_RUN_TIMEOUT_S,
    CheckpointNode,
    NodeContext,
    Workflow,
    resolve_timeout,
    resolve_value,
)
from ..protocol.definitions.values import OutputError, check_output
from ..protocol.limits import safe_error_message
from ..protocol.states import Outcome
from .control import Control
from .nodes import NodeOutcome, Watch, error_outcome, run_callable


def waiting_output(node: CheckpointNode, ctx: NodeContext, workflow: Workflow, control: Control,
                   *, park_grace_s: float, stop_grace_s: float,
                   monotonic: Callable[[], float] = time.monotonic,
                   wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
                   ) -> dict[str, Any] | NodeOutcome:
    """The waiting output of ``node``, or the outcome that fails (or stops) it."""
    try:
        summary = resolve_value(node.summary, ctx)
        output: dict[str, Any] = {"summary": None if summary is None else str(summary)}
        if isinstance(node, HumanDecisionNode):
            timeout_s = resolve_timeout(node, workflow, ctx) if node.on_timeout else None
            output["request"] = request_of(node, ctx, timeout_s, wall_ms())
    except Exception as exc:
        return error_outcome(exc)
    if node.run is not None:
        fn = node.run
        watch = Watch(control, ctx.cancel, CHECKPOINT_RUN_TIMEOUT_S, effectful=False,
                      park_grace_s=park_grace_s, stop_grace_s=stop_grace_s,
                      monotonic=monotonic)
        result = run_callable(lambda: fn(ctx), watch, CHECKPOINT_RUN_TIMEOUT_S)
        if result.outcome != Outcome.OK:
            return result
        output["data"] = result.output
    try:
        return dict(check_output(node.id, output))
    except OutputError as exc:
        return NodeOutcome(Outcome.FAILED, error_code="output_invalid",
                           error=safe_error_message(exc.message))
