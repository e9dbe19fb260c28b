"""pi-workflows: a durable, always-on runner for multi-step agent workflows.

This top-level package is the one short import for workflow authors
(``from pi_workflows import define_workflow, compute, edge, ...``); the
implementation lives in ``pi_workflows.protocol``, ``pi_workflows.worker``
and ``pi_workflows.supervisor``. It re-exports the authoring API from
``protocol.definition`` and ``protocol.define`` only and must not import
``worker`` or ``supervisor``.
"""

from __future__ import annotations

from .protocol.define import define_workflow
from .protocol.definition import (
    DEFAULT,
    DefinitionError,
    NodeContext,
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
    "shell",
    "snapshot",
    "switch",
]
