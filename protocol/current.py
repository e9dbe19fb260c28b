"""Which node attempt the current thread works for: the context an action's thread runs in.

Owns one context variable and the call that sets it around a node's
function (``call_in_node``), so helpers an author calls without a context
argument (``run_command_batch``) still find the node's stop event and
project directory. The worker sets it inside the node's own thread; a
thread the author starts has none (such code passes ``ctx=`` instead).
Imports only ``protocol.definitions.graph`` (the ``NodeContext`` type).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from .definitions.graph import NodeContext

_CURRENT: ContextVar[NodeContext | None] = ContextVar("pi_workflows_node", default=None)


def current_context() -> NodeContext | None:
    """The context of the node attempt this thread runs, if the worker set one."""
    return _CURRENT.get()


def call_in_node(ctx: NodeContext, fn: Callable[[NodeContext], Any]) -> Any:
    """``fn(ctx)`` with ``ctx`` as the current context for its duration."""
    token = _CURRENT.set(ctx)
    try:
        return fn(ctx)
    finally:
        _CURRENT.reset(token)
