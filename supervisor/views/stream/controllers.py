"""The controllers document: every resource with its Ready condition and child runs.

Owns ``controllers_doc`` (what the dashboard's controllers page shows: a
resource's controller, key, generation and observed generation, Ready
status, reason and message, whether it is being deleted, and the run ids
of its child workflows; never its spec, which may carry private values).
Reads the store only; never writes. Imports ``protocol`` and
``supervisor.views.controllers``.
"""

from __future__ import annotations

from typing import Any

from ....protocol.clock import now_ms
from ....protocol.store import Store
from ..controllers import ready

MAX_RESOURCES = 1000
MAX_CHILDREN = 10  # the newest of a resource's child runs


def controllers_doc(store: Store | None, now: int | None = None) -> dict[str, Any]:
    at = now_ms() if now is None else now
    resources: list[dict[str, Any]] = []
    rows = store.list_resources(limit=MAX_RESOURCES + 1) if store is not None else []
    for row in rows[:MAX_RESOURCES]:
        cond = ready(row.status)
        children = store.children_of(row.controller, row.key) if store is not None else []
        resources.append({
            "controller": row.controller, "key": row.key, "generation": row.generation,
            "observedGeneration": row.status.get("observed_generation"),
            "ready": cond.get("status"), "reason": cond.get("reason") or "",
            "message": cond.get("message") or "", "deleting": bool(row.deletion_requested),
            "children": [{"runId": c.run_id, "state": c.run_state}
                         for c in children[-MAX_CHILDREN:]],
        })
    return {"kind": "controllers", "at": at, "resources": resources,
            "truncated": len(rows) > MAX_RESOURCES,
            "notReady": sum(1 for r in resources if r["ready"] != "true")}
