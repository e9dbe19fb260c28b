"""The store as one reconcile sees it: every write fenced by its work claim's token.

Owns ``ClaimedPort``, the ``protocol.controllers.context.ReconcilePort`` of
one claimed reconcile (effect records, child runs, resource events) over the
store's controller operations, and ``find_workflow`` (a child workflow by
name, from the directories the host named). The only worker module that
speaks the store's controller API, so a change there is a change here only.
Imports ``protocol``; must not import ``supervisor``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..protocol.controllers.context import ChildRecord, EffectRecord
from ..protocol.definitions.discovery import SUFFIX, LoadedWorkflow, load_workflow_file
from ..protocol.definitions.values import apply_input
from ..protocol.errors import NotFound
from ..protocol.runid import new_run_id
from ..protocol.store import RunSource, Store


def find_workflow(name: str, dirs: tuple[Path, Path]) -> LoadedWorkflow:
    """The workflow ``name`` from the project's directory, else the global one."""
    for directory in dirs:
        path = directory / f"{name}{SUFFIX}"
        if path.is_file():
            return load_workflow_file(path)
    raise NotFound(f"no workflow named {name!r} in {dirs[0]} or {dirs[1]}",
                   code="workflow_not_found")


class ClaimedPort:
    """``ReconcilePort`` for the reconcile of resource ``uid`` held under ``token``."""

    def __init__(self, store: Store, *, controller: str, key: str, uid: str, token: str,
                 dirs: tuple[Path, Path]) -> None:
        self.store, self.controller, self.key = store, controller, key
        self.uid, self.token, self.dirs = uid, token, dirs

    def reserve_effect(self, key: str, *, kind: str, fingerprint: str, generation: int,
                       request: Any) -> tuple[EffectRecord, bool]:
        return self.store.reserve_reconcile_effect(  # type: ignore[no-any-return]
            self.uid, key, kind=kind, fingerprint=fingerprint, generation=generation,
            request=request, token=self.token)

    def settle_effect(self, key: str, state: str, result: Any) -> EffectRecord:
        return self.store.settle_reconcile_effect(  # type: ignore[no-any-return]
            self.uid, key, state, result, token=self.token)

    def child_run(self, request_key: str, fingerprint: str) -> ChildRecord | None:
        return self.store.latest_child_run(  # type: ignore[no-any-return]
            self.uid, request_key, fingerprint)

    def start_child_run(self, request_key: str, fingerprint: str, workflow: str, input: Any,
                        attempt: int) -> ChildRecord:
        loaded = find_workflow(workflow, self.dirs)
        apply_input(loaded.workflow, input)  # a bad input fails this pass, nothing reserved
        run_id = new_run_id(loaded.name)
        child = self.store.reserve_child_run(
            self.uid, request_key, fingerprint, attempt=attempt, run_id=run_id,
            workflow=workflow, token=self.token)
        return self._queue(child, loaded, input)

    def queue_child_run(self, child: ChildRecord, workflow: str, input: Any) -> ChildRecord:
        return self._queue(child, find_workflow(workflow, self.dirs), input)

    def _queue(self, child: ChildRecord, loaded: LoadedWorkflow, input: Any) -> ChildRecord:
        parsed = apply_input(loaded.workflow, input)
        source = RunSource(loaded.name, loaded.source.path, loaded.source.sha256, loaded.digest)
        return self.store.enqueue_child_run(  # type: ignore[no-any-return]
            self.uid, child.run_id, source, parsed, token=self.token)

    def log(self, level: str, message: str, data: Any) -> None:
        self.store.append_resource_event(self.controller, self.key, "log",
                                         {"level": level, "message": message, "data": data})
