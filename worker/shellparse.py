"""A shell node's ``parse``: its output shaped from the command's result.

Owns applying ``parse(result, ctx)`` to the shell result ``{exitCode,
stdout, stderr, truncated}`` once the guarded effect has settled, fresh or
replayed: the effect's record keeps the raw result, so a resume after a
crash parses the recorded result again and never reruns the command. It
runs under the node's watch (the time left of its timeout, a park or a
cancel). What it returns is the node's output; its exception fails the node
with ``parse_failed`` (the raw result stays the failed node's output, as
evidence for ``logs``). Imports ``protocol`` and worker helpers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..protocol.definitions.graph import NodeContext
from ..protocol.limits import safe_error_message
from ..protocol.states import Outcome
from .nodes import NodeOutcome, Watch, run_callable


def shaped(parse: Callable[[Any, NodeContext], Any], node_id: str, outcome: NodeOutcome,
           ctx: NodeContext, watch: Watch, timeout_s: float | None) -> NodeOutcome:
    """``outcome`` with its output replaced by what ``parse`` made of it (only an ok one)."""
    if outcome.outcome != Outcome.OK:
        return outcome
    raw = outcome.output
    parsed = run_callable(lambda: parse(raw, ctx), watch, timeout_s)
    if parsed.outcome == Outcome.OK:
        return NodeOutcome(Outcome.OK, output=parsed.output, extra=outcome.extra)
    if parsed.outcome != Outcome.FAILED:
        return parsed  # stopped (timeout, park, cancel) while it parsed
    error = parsed.error or "it failed"
    # ``run_callable`` reports "Type: message"; say which function of the node raised.
    return NodeOutcome(Outcome.FAILED, output=raw, error_code="parse_failed",
                       error=safe_error_message(f"parse of shell node {node_id!r} raised"
                                                f" {error}"),
                       extra=outcome.extra, traceback=parsed.traceback)

