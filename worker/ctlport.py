"""The store as one reconcile sees it: every write fenced by its work claim's token.

Owns ``ClaimedPort``, the ``protocol.controllers.context.ReconcilePort`` of
one claimed reconcile (effect records, child runs, resource events) over the
store's controller operations (``protocol.store.controllers``), and
``find_workflow`` (a child workflow by name, from the directories the host
named). The only worker module that speaks the store's controller API.
Imports ``protocol``; must not import ``supervisor``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..protocol.controllers.context import ChildRecord, EffectRecord
from ..protocol.definitions.discovery import SUFFIX, LoadedWorkflow, load_workflow_file
from ..protocol.definitions.values import apply_input
from ..protocol.errors import NotFound
from ..protocol.runid import new_run_id
from ..protocol.store import RunSource, Store
from ..protocol.store.controllers import ChildRun as ChildRow


def find_workflow(name: str, dirs: tuple[Path, Path]) -> LoadedWorkflow:
    """The workflow ``name`` from the project's directory, else the global one."""
    for directory in dirs:
        path = directory / f"{name}{SUFFIX}"
        if path.is_file():
            return load_workflow_file(path)
    raise NotFound(f"no workflow named {name!r} in {dirs[0]} or {dirs[1]}",
                   code="workflow_not_found")


@dataclass(frozen=True)
class Child:
    """A child attempt as ``ctx.workflows`` sees it: ``state`` is the record's
    (``reserved``, ``interrupted``) or else its run's queue state."""

    run_id: str
    attempt: int
    fingerprint: str
    state: str


def _child(row: ChildRow) -> Child:
    if row.state in ("reserved", "interrupted"):
        state = row.state
    else:
        state = row.run_state or "interrupted"  # queued, and the run row is gone: lost
    return Child(row.run_id, row.attempt, row.input_fingerprint, state)


_MARK = {"applied": "mark_reconcile_effect_applied", "rejected": "mark_reconcile_effect_rejected",
         "indeterminate": "mark_reconcile_effect_indeterminate"}


class ClaimedPort:
    """``ReconcilePort`` for the reconcile of ``controller/key`` held under ``token``."""

    def __init__(self, store: Store, *, controller: str, key: str, token: str,
                 dirs: tuple[Path, Path]) -> None:
        self.store, self.controller, self.key = store, controller, key
        self.token, self.dirs = token, dirs

    def reserve_effect(self, key: str, *, kind: str, fingerprint: str, generation: int,
                       request: Any) -> tuple[EffectRecord, bool]:
        return self.store.reserve_reconcile_effect(
            self.controller, self.key, key, kind=kind, fingerprint=fingerprint,
            generation=generation, token=self.token)

    def settle_effect(self, key: str, state: str, result: Any) -> EffectRecord:
        mark = getattr(self.store, _MARK[state])
        record: EffectRecord = mark(self.controller, self.key, key, result, token=self.token)
        return record

    def child_run(self, request_key: str, fingerprint: str) -> ChildRecord | None:
        row = self.store.child_for(self.controller, self.key, request_key)
        if row is None:
            return None
        child = _child(row)
        if child.state == "interrupted" and row.state != "interrupted":
            self.store.mark_child_interrupted(row.run_id, "the child run's queue row is gone",
                                              token=self.token)
        return child

    def start_child_run(self, request_key: str, fingerprint: str, workflow: str, input: Any,
                        attempt: int) -> ChildRecord:
        loaded = find_workflow(workflow, self.dirs)
        apply_input(loaded.workflow, input)  # a bad input fails this pass, nothing reserved
        row, _ = self.store.reserve_child(
            self.controller, self.key, request_key, workflow=loaded.name,
            input_fingerprint=fingerprint, run_id=new_run_id(loaded.name), token=self.token)
        if row.state != "reserved":  # raced with another pass: what it made
            return _child(row)
        return self._queue(row.run_id, loaded, input)

    def queue_child_run(self, child: ChildRecord, workflow: str, input: Any) -> ChildRecord:
        return self._queue(child.run_id, find_workflow(workflow, self.dirs), input)

    def _queue(self, run_id: str, loaded: LoadedWorkflow, input: Any) -> Child:
        parsed = apply_input(loaded.workflow, input)
        source = RunSource(loaded.name, loaded.source.path, loaded.source.sha256, loaded.digest)
        return _child(self.store.enqueue_child(run_id, source, parsed, token=self.token))

    def log(self, level: str, message: str, data: Any) -> None:
        self.store.append_controller_event(self.controller, self.key, "log", message,
                                           {"level": level, "data": data}, token=self.token)
