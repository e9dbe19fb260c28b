"""The scripted model server for tests, re-exported from the product.

The server lives in ``pi_workflows.supervisor.model.scripted`` (``pi-workflows
drill`` runs agent steps against it); the unit tests, the e2e drills and the
bench keep importing it from here. Imports that module only.
"""

from __future__ import annotations

from pi_workflows.supervisor.model.scripted import (
    COMPLETIONS_PATH,
    MODELS_PATH,
    SECRET_HEADERS,
    Close,
    HttpError,
    Reply,
    Request,
    Script,
    ScriptedModel,
    Stall,
    Text,
    ToolCall,
    ToolCalls,
    call,
    message_text,
)

__all__ = ["COMPLETIONS_PATH", "MODELS_PATH", "SECRET_HEADERS", "Close", "HttpError", "Reply",
           "Request", "Script", "ScriptedModel", "Stall", "Text", "ToolCall", "ToolCalls", "call",
           "message_text"]
