"""pi-workflows: a durable, always-on runner for multi-step agent workflows.

This top-level package is the one short import for workflow authors
(``from pi_workflows import define_workflow, compute, edge, ...``); the
implementation lives in ``pi_workflows.protocol``, ``pi_workflows.worker``
and ``pi_workflows.supervisor``. It re-exports the authoring API from
the definition modules (``graph``, ``define``, ``compose``, ``decisions``,
``decisions_agent``, ``verdicts``, ``progress``), ``protocol.batch`` and
``protocol.controllers`` (``define_controller``, ``EffectRejected``) only
and must not import
``worker`` or ``supervisor``. The names load on first use (PEP 562): every
``pi_workflows.*`` import runs this file first, and the command line must
not pay for the definition model it does not use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .protocol.batch import run_command_batch
    from .protocol.controllers.context import EffectRejected
    from .protocol.controllers.define import Controller, define_controller
    from .protocol.definitions.compose import include, included_result
    from .protocol.definitions.decisions import (
        choice,
        human_decision,
        human_decision_edge,
        text_input,
    )
    from .protocol.definitions.decisions_agent import decision, decision_edge
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
    from .protocol.definitions.progress import parse_line
    from .protocol.definitions.verdicts import Replace

__version__ = "0.1.0a1"
__all__ = [
    "DEFAULT",
    "Controller",
    "DefinitionError",
    "EffectRejected",
    "NodeContext",
    "Replace",
    "RunInfo",
    "Workflow",
    "__version__",
    "action",
    "agent",
    "checkpoint",
    "choice",
    "compute",
    "decision",
    "decision_edge",
    "define_controller",
    "define_workflow",
    "definition_digest",
    "edge",
    "human_decision",
    "human_decision_edge",
    "include",
    "included_result",
    "notify",
    "parse_line",
    "run_command_batch",
    "shell",
    "snapshot",
    "switch",
    "text_input",
]
# Names defined outside ``graph``, by the module (relative to this package) that owns each.
_ELSEWHERE = {"include": ".protocol.definitions.compose",
              "parse_line": ".protocol.definitions.progress",
              "included_result": ".protocol.definitions.compose",
              "decision": ".protocol.definitions.decisions_agent",
              "decision_edge": ".protocol.definitions.decisions_agent",
              "choice": ".protocol.definitions.decisions",
              "human_decision": ".protocol.definitions.decisions",
              "human_decision_edge": ".protocol.definitions.decisions",
              "text_input": ".protocol.definitions.decisions",
              "run_command_batch": ".protocol.batch",
              "Replace": ".protocol.definitions.verdicts",
              "Controller": ".protocol.controllers.define",
              "define_controller": ".protocol.controllers.define",
              "EffectRejected": ".protocol.controllers.context"}


def __getattr__(name: str) -> Any:
    if name == "define_workflow":
        from .protocol.definitions.define import define_workflow as value
    elif name in _ELSEWHERE:
        import importlib

        value = getattr(importlib.import_module(_ELSEWHERE[name], __name__), name)
    elif name in __all__:
        from .protocol.definitions import graph as definition

        value = getattr(definition, name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # looked up once
    return value
