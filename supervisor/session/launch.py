"""Preflight for new runs and continuations: every check before a queue row exists.

Owns resolving a workflow, validating its input, pinning its source and
digest, and (for an answer to a checkpoint) checking the waiting parent.
Nothing durable is written here: a failed preflight leaves no row.
Imports protocol modules only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...protocol.artifacts import REF_KEY, reserved_key_path
from ...protocol.bundle import Bundle
from ...protocol.definitions.discovery import Catalog, LoadedWorkflow, load_workflow_file
from ...protocol.definitions.requests import decide, request_in
from ...protocol.definitions.values import apply_input
from ...protocol.errors import NotFound, UsageError
from ...protocol.includepins import includes_changed
from ...protocol.limits import encode_private_input, validate_run_id
from ...protocol.runid import new_run_id
from ...protocol.states import RunStatus
from ...protocol.store import RunSource


@dataclass(frozen=True)
class Prepared:
    """A launch that passed preflight: enqueue it with ``source`` and ``input``."""

    run_id: str
    loaded: LoadedWorkflow
    source: RunSource
    input: Any
    parent_run_id: str | None = None
    # The launcher's Pi agent dir, recorded with the run (protocol.agentenv).
    agent_dir: str | None = None


def run_source(loaded: LoadedWorkflow) -> RunSource:
    return RunSource(loaded.name, loaded.source.path, loaded.source.sha256, loaded.digest)


def _no_reserved_key(value: Any, what: str) -> None:
    where = reserved_key_path(value)
    if where:
        raise UsageError(f"{what} uses the reserved key {REF_KEY!r} at {where}",
                         code="input_invalid")


def prepare_run(catalog: Catalog, name: str, raw_input: Any) -> Prepared:
    loaded = catalog.get(name)
    parsed = apply_input(loaded.workflow, raw_input)
    _no_reserved_key(parsed, "the run input")
    encode_private_input(parsed)  # the size limit, before anything is written
    return Prepared(new_run_id(loaded.name), loaded, run_source(loaded), parsed)


def prepare_continuation(runs_dir: Path, parent_run_id: str, answer: Any, *,
                         force: bool = False) -> Prepared:
    """Check the parent waits at a checkpoint and its source is unchanged.

    A human decision's answer must be one of its answers; it becomes the
    answer object (``protocol.definitions.requests.decide``).
    """
    validate_run_id(parent_run_id)
    parent = Bundle(runs_dir, parent_run_id)
    if not parent.exists():
        raise NotFound(f"run {parent_run_id} has no bundle", code="run_not_found")
    state = parent.state()
    if state.get("status") != RunStatus.WAITING:
        raise UsageError(f"run {parent_run_id} is {state.get('status')}, not waiting at a"
                         " checkpoint; only a waiting run can be answered", code="not_waiting")
    manifest = parent.manifest()
    source_path = (manifest.get("source") or {}).get("path")
    if not source_path:
        raise UsageError(f"run {parent_run_id} does not record its workflow source")
    loaded = load_workflow_file(source_path)
    if loaded.digest != manifest.get("digest") and not force:
        changed = includes_changed(manifest, loaded.workflow)
        own = (manifest.get("source") or {}).get("sha256") == loaded.source.sha256
        what = (f"the included workflow file {changed[0]['path']} of run {parent_run_id}"
                if changed and own else f"the workflow of run {parent_run_id}")
        raise UsageError(f"{what} changed since it started;"
                         " answer with --force to continue on the new definition",
                         code="source_changed")
    request = request_in(state.get("waitingOutput"))
    if request is not None:  # a human decision: only its answers, shaped (AnswerRefused)
        answer = decide(request, answer, parent_run_id)
    _no_reserved_key(answer, "the answer")
    encode_private_input(answer)
    return Prepared(new_run_id(loaded.name), loaded, run_source(loaded), answer,
                    parent_run_id=parent_run_id)
