"""How a composed run's mounts read in the views: the mount of a node, its entries and exits.

Owns the words ``status``, ``watch``, ``logs`` and the live view use for an
``include``: the note after a node inside a mount (``review/score (in include
review)``) and the line of an ``include_entered`` / ``include_exited`` event.
Node ids already hold the mount path (``mount/local``); this only says so.
Imports nothing of the project; must not import ``worker``.
"""

from __future__ import annotations

from typing import Any

MOUNT_EVENTS = ("include_entered", "include_exited")
MOUNT_KIND = "mount"  # an include's entry or exit node in the snapshot (no step)


def mount_note(node_id: Any) -> str:
    """`` (in include MOUNT)`` for a node inside an include, else empty."""
    if not isinstance(node_id, str) or "/" not in node_id:
        return ""
    return f" (in include {node_id.rsplit('/', 1)[0]})"


def mount_line(event: dict[str, Any]) -> str | None:
    """The words of an include event (without its time), None for any other event."""
    kind, p = event.get("type"), event.get("payload") or {}
    nxt = f" -> {p['next']}" if p.get("next") else ""
    if kind == "include_entered":
        child = f" (workflow {p['workflow']})" if p.get("workflow") else ""
        return f"{p.get('mount')}: entered include{child}{nxt}"
    if kind == "include_exited":
        return f"{p.get('mount')}: left include by exit {p.get('exit')}{nxt}"
    return None
