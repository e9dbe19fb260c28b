"""The controller half of the store: resources, their work queue, events,
reconcile effects and child runs (issue 24), in the project's one SQLite file.

``ControllerOps`` combines the mixins and is mixed into ``Store``, so a child
run's enqueue and its controller record commit in one transaction. Tables:
``schema.CONTROLLER_STATEMENTS``. Must not import sqlite3, the worker or
the supervisor, nor any user code (reconcile functions are the runtime's).
"""

from __future__ import annotations

from .bounds import (
    MAX_CONTROLLER_NAME_CHARS,
    MAX_DOCUMENT_BYTES,
    MAX_RESOURCE_KEY_CHARS,
    fingerprint,
    validate_controller_name,
    validate_resource_key,
)
from .children import CtlChildOps
from .core import MAX_EVENTS_PER_RESOURCE
from .effects import CtlEffectOps
from .events import CtlEventOps
from .records import (
    Applied,
    ChildEnded,
    ChildRun,
    Conflict,
    CtlEvent,
    Deleted,
    Finished,
    Outcome,
    QueueEntry,
    ReconcileClaim,
    ReconcileEffect,
    Resource,
    error,
    requeue,
    requeue_after,
    settled,
)
from .workqueue import BACKOFF_BASE_MS, BACKOFF_MAX_MS, CtlQueueOps, backoff_ms

__all__ = [
    "BACKOFF_BASE_MS", "BACKOFF_MAX_MS", "MAX_CONTROLLER_NAME_CHARS", "MAX_DOCUMENT_BYTES",
    "MAX_EVENTS_PER_RESOURCE", "MAX_RESOURCE_KEY_CHARS", "Applied", "ChildEnded", "ChildRun",
    "Conflict", "ControllerOps", "CtlEvent", "Deleted", "Finished", "Outcome", "QueueEntry",
    "ReconcileClaim", "ReconcileEffect", "Resource", "backoff_ms", "error", "fingerprint",
    "requeue", "requeue_after", "settled", "validate_controller_name", "validate_resource_key",
]


class ControllerOps(CtlQueueOps, CtlEventOps, CtlEffectOps, CtlChildOps):
    """Every controller operation (see each mixin's docstrings)."""
