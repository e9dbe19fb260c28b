"""pi-workflows: a durable, always-on runner for multi-step agent workflows.

This top-level package is the one short import for workflow authors
(``from pi_workflows import define_workflow, compute, edge, ...``); the
implementation lives in ``pi_workflows.protocol``, ``pi_workflows.worker``
and ``pi_workflows.supervisor``. It re-exports the authoring API from
``protocol.definitions.graph`` and ``protocol.definitions.define`` (and
``run_command_batch`` from ``protocol.batch``) only and must not import
``worker`` or ``supervisor``. The names load on first use (PEP 562): every
``pi_workflows.*`` import runs this file first, and the command line must
not pay for the definition model it does not use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .protocol.batch import run_command_batch
    from .protocol.definitions.define import define_workflow
    from .protocol.definitions.graph import (
        DEFAULT,
        DefinitionError,
        NodeContext,
        RunInfo,
        Workflow,
        action,
        agent,
        checkpoint,
        compute,
        definition_digest,
        edge,
        notify,
        shell,
        snapshot,
        switch,
    )

__version__ = "0.1.0a1"
__all__ = [
    "DEFAULT",
    "DefinitionError",
    "NodeContext",
    "RunInfo",
    "Workflow",
    "__version__",
    "action",
    "agent",
    "checkpoint",
    "compute",
    "define_workflow",
    "definition_digest",
    "edge",
    "notify",
    "run_command_batch",
    "shell",
    "snapshot",
    "switch",
]


def __getattr__(name: str) -> Any:
    if name == "define_workflow":
        from .protocol.definitions.define import define_workflow as value
    elif name == "run_command_batch":
        from .protocol import batch

        value = getattr(batch, name)
    elif name in __all__:
        from .protocol.definitions import graph as definition

        value = getattr(definition, name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # looked up once
    return value
