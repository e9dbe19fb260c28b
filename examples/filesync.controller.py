"""Keep a file in the project in sync with its spec; report each change with a workflow.

A resource's spec names the file and its text::

    pi-workflows controller apply filesync notes \
        --spec-json '{"path": "synced/notes.txt", "text": "hello"}'

Each pass reads the file first (the outside world, never a remembered
state). If it differs, one guarded effect writes it, through a shell
command, and the pass asks to run again; once it matches, a child workflow
(``filesync-report``) reports it, and the resource is Ready when that run
has completed. ``controller delete`` removes the file, then the finalizer.

Kill -9 at any moment repeats no applied write: the effect is recorded
``pending`` before the command runs; a pass that finds it pending reads the
file to tell whether it was written (see docs/controllers.md).

Copy it and ``filesync-report.workflow.py`` into ``.pi/workflows/``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from pi_workflows import define_controller

WRITE = 'mkdir -p "$(dirname "$1")" && printf %s "$2" > "$1"'


def _spec(spec: Any) -> tuple[str, str]:
    """The spec, checked deterministically: a relative path inside the project, and text."""
    path, text = spec.get("path"), spec.get("text", "")
    if not isinstance(path, str) or not path or Path(path).is_absolute() or ".." in Path(
            path).parts:
        raise ValueError("spec.path must be a relative path inside the project")
    if not isinstance(text, str) or len(text) > 65536:
        raise ValueError("spec.text must be text of at most 64 KiB")
    return path, text


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        return None


def _ready(status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": "Ready", "status": status, "reason": reason, "message": message}


def _write(request: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(["sh", "-c", WRITE, "filesync", request["path"], request["text"]],
                          capture_output=True, text=True, timeout=10, check=False)
    if done.returncode != 0:
        raise OSError(f"the write failed ({done.returncode}): {done.stderr.strip()[:200]}")
    return {"bytes": len(request["text"].encode())}


def _remove(request: dict[str, str]) -> dict[str, Any]:
    subprocess.run(["rm", "-f", "--", request["path"]], check=True, timeout=10)
    return {"removed": request["path"]}


def reconcile(ctx: Any, resource: Any) -> None:
    gen = resource.metadata.generation
    mine = dict(resource.status.get("controller_status") or {})
    writes = int(mine.get("writes", 0))
    path, text = _spec(resource.spec)
    if resource.metadata.deletion_requested:
        ctx.effects.ensure(
            key=f"remove-{gen}", kind="shell", request={"path": path},
            observe=lambda req: "applied" if _read(req["path"]) is None else "not_applied",
            apply=_remove)
        ctx.remove_finalizer()
        ctx.settled({"conditions": [_ready("false", "Deleted")]})
        return
    if _read(path) != text:
        # One write per pass, keyed by generation and by how many writes this
        # generation has needed (a file changed behind our back is written again).
        result = ctx.effects.ensure(
            key=f"write-{gen}-{writes}", kind="shell", request={"path": path, "text": text},
            observe=lambda req: "applied" if _read(req["path"]) == req["text"] else "not_applied",
            apply=_write)
        mine["writes"] = writes + 1
        if result.state == "indeterminate":
            ctx.requeue_after(5, {"controller_status": mine, "conditions": [
                _ready("false", "WriteUncertain", str(result.result)[:200])]})
            return
        ctx.requeue({"controller_status": mine,
                     "conditions": [_ready("false", "Written", f"wrote {path}")]})
        return
    child = ctx.workflows.ensure(request_key=f"report-{gen}", workflow="filesync-report",
                                 input={"path": path, "generation": gen})
    patch: dict[str, Any] = {"observed_generation": gen, "workflow_run": child.run_id,
                             "controller_status": {**mine, "path": path}}
    if not child.finished:  # its end queues this resource again
        ctx.settled({**patch, "conditions": [_ready("false", "Reporting", child.run_id)]})
    elif child.state == "done":
        ctx.settled({**patch, "conditions": [_ready("true", "InSync", f"{path} matches")]})
    else:
        ctx.settled({**patch, "conditions": [_ready("false", "ReportFailed", child.state)]})


controller = define_controller(
    name="filesync", initial_status=lambda spec: {"writes": 0}, reconcile=reconcile,
    timeout=30, description="Keep a file in the project in sync with its spec.")
