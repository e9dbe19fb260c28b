"""Source pinning of included files: what the manifest records, what changed since.

Owns the ``includes`` list of a run's manifest (each file an ``include``
loaded: mount, workflow, real path, sha256, beside the parent's ``source``)
and comparing it with the files the definition loads now (the engine's
``reopen``, ``resume --force``'s repin). Imports only
``protocol.definitions.graph``; must not import ``worker`` or ``supervisor``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .definitions.graph import Workflow


def included_files(workflow: Workflow) -> dict[str, Any]:
    """``{"includes": [...]}`` for the manifest, or nothing for a workflow without includes."""
    if not workflow.includes:
        return {}
    return {"includes": [{"mount": f.mount, "workflow": f.workflow, "path": f.path,
                          "sha256": f.sha256} for f in workflow.includes]}


def includes_changed(manifest: Mapping[str, Any], workflow: Workflow) -> list[dict[str, Any]]:
    """Each pinned included file whose bytes (or presence) differ now, by mount."""
    pinned = {str(f.get("mount")): f for f in manifest.get("includes") or []
              if isinstance(f, Mapping)}
    now = {f.mount: f for f in workflow.includes}
    changed: list[dict[str, Any]] = []
    for mount in sorted(set(pinned) | set(now)):
        old, new = pinned.get(mount) or {}, now.get(mount)
        if old.get("sha256") != (new.sha256 if new else None):
            changed.append({"mount": mount, "path": new.path if new else old.get("path"),
                            "expectedSha256": old.get("sha256"),
                            "actualSha256": new.sha256 if new else None})
    return changed
