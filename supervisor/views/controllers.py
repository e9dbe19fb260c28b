"""How resources, their effects, child runs and events read on a terminal.

Owns the one-line form of a resource (``NAME/KEY  Ready=true  reason``),
the ``get`` page and an event line, and the JSON shapes of ``controller get``
and ``list``. Reads store rows handed in; writes nothing. Imports the
standard library only.
"""

from __future__ import annotations

import json
import time
from typing import Any

NOT_READY = "unknown"


def ready(status: dict[str, Any]) -> dict[str, Any]:
    """The resource's Ready condition, or an unknown one."""
    for cond in status.get("conditions") or ():
        if cond.get("type") == "Ready":
            return dict(cond)
    return {"type": "Ready", "status": NOT_READY, "reason": "", "message": ""}


def resource_json(row: Any) -> dict[str, Any]:
    return {"controller": row.controller, "key": row.key, "metadata": row.metadata(),
            "spec": row.spec, "status": row.status, "ready": ready(row.status)}


def resource_line(row: Any) -> str:
    cond = ready(row.status)
    deleting = " deleting" if row.deletion_requested else ""
    reason = f"  {cond.get('reason')}" if cond.get("reason") else ""
    observed = row.status.get("observed_generation")
    return (f"{row.controller}/{row.key}  Ready={cond.get('status')}{reason}"
            f"  generation {row.generation} (observed"
            f" {'-' if observed is None else observed}){deleting}")


def iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def event_line(event: Any) -> str:
    data = event.data if isinstance(event.data, dict) else {"value": event.data}
    message = data.get("message") or json.dumps(data, sort_keys=True)
    return f"{iso(event.at)}  {event.type:<10}  {message}"


def child_state(child: Any) -> str:
    """What a person asks of an attempt: its run's state (the record's own
    ``reserved``/``queued`` only says the run was handed to the queue)."""
    run = child.run_state or "not queued yet"
    return f"interrupted (run {run})" if child.state == "interrupted" else f"run {run}"


def get_page(row: Any, effects: list[Any], children: list[Any], events: list[Any]) -> list[str]:
    cond = ready(row.status)
    lines = [resource_line(row), f"uid {row.uid}  resource_version {row.resource_version}"
             f"  finalizers {', '.join(row.finalizers) or '-'}",
             f"ready: {cond.get('status')} {cond.get('reason') or ''}"
             f" {cond.get('message') or ''}".rstrip(),
             "spec: " + json.dumps(row.spec, sort_keys=True),
             "controller_status: " + json.dumps(row.status.get("controller_status"),
                                                 sort_keys=True)]
    lines.append(f"effects ({len(effects)}):")
    lines += [f"  {e.effect_key}  {e.kind}  {e.state}  generation {e.generation}"
              for e in effects]
    lines.append(f"child runs ({len(children)}):")
    lines += [f"  {c.run_id}  {c.request_key} attempt {c.attempt}  {child_state(c)}"
              for c in children]
    lines.append(f"events (last {len(events)}):")
    lines += ["  " + event_line(e) for e in events]
    return lines
