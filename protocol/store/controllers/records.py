"""Typed records the controller store returns (plain data, no behaviour).

Owns the shapes of resources, reconcile claims and outcomes, controller
events, reconcile effects and child runs. Built with ``protocol.record``
(never dataclasses: the store is on the read commands' fast path). Imports
nothing from the store.
"""

from __future__ import annotations

import json
from typing import Any

from ...record import record

# Outcome kinds a reconcile ends with (``Outcome.kind``).
SETTLED = "settled"
REQUEUE = "requeue"
REQUEUE_AFTER = "requeue_after"
ERROR = "error"
# What ``finish_reconcile`` did instead when the status write lost its race.
CONFLICT = "conflict"


@record(frozen=True)
class Resource:
    """One (controller, key) resource: spec owned by the caller, status by the controller."""

    controller: str
    key: str
    uid: str
    resource_version: int
    generation: int
    spec: Any
    status: dict[str, Any]
    deletion_requested: bool
    finalizers: tuple[str, ...]
    created_at: int
    updated_at: int

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Resource:
        return cls(row["controller"], row["key"], row["uid"], row["resource_version"],
                   row["generation"], json.loads(row["spec"]), json.loads(row["status"]),
                   bool(row["deletion_requested"]), tuple(json.loads(row["finalizers"])),
                   row["created_at"], row["updated_at"])

    def metadata(self) -> dict[str, Any]:
        return {"uid": self.uid, "controller": self.controller, "key": self.key,
                "resource_version": self.resource_version, "generation": self.generation,
                "deletion_requested": self.deletion_requested,
                "finalizers": list(self.finalizers),
                "created_at": self.created_at, "updated_at": self.updated_at}

    def public(self) -> dict[str, Any]:
        """The resource as a reconcile (and ``get --json``) sees it."""
        return {"metadata": self.metadata(), "spec": self.spec, "status": self.status}


@record(frozen=True)
class Applied:
    """What ``apply_spec`` did: ``created``, ``changed`` (spec differs) or neither (no-op)."""

    resource: Resource
    created: bool
    changed: bool


@record(frozen=True)
class Conflict:
    """A compare-and-set on ``resource_version`` lost its race: nothing was written.

    The store recorded a ``conflict`` event and queued the key again at once.
    """

    controller: str
    key: str
    expected_version: int
    actual_version: int


@record(frozen=True)
class Deleted:
    """The resource row is gone: deletion was requested and no finalizer is left."""

    controller: str
    key: str
    uid: str


@record(frozen=True)
class Outcome:
    """How a reconcile ended. Build with the helpers below, not by hand."""

    kind: str
    delay_s: float | None = None
    error: str | None = None


def settled() -> Outcome:
    return Outcome(SETTLED)


def requeue() -> Outcome:
    return Outcome(REQUEUE)


def requeue_after(seconds: float) -> Outcome:
    return Outcome(REQUEUE_AFTER, float(seconds))


def error(message: str) -> Outcome:
    return Outcome(ERROR, None, message)


@record(frozen=True)
class ReconcileClaim:
    """Proof that this runner reconciles (controller, key) now, with the resource as read."""

    controller: str
    key: str
    runner_id: str
    token: str
    lease_expires_at: int
    lease_ms: int
    attempts: int
    resource: Resource | None


@record(frozen=True)
class Finished:
    """What ``finish_reconcile`` did: the outcome kept (``conflict`` if the status
    write lost), when the key is due again (None: it left the queue), its
    attempt count, and the resource after the write (None: deleted or absent)."""

    controller: str
    key: str
    outcome: str
    due_at: int | None
    attempts: int
    dirty: bool
    resource: Resource | None


@record(frozen=True)
class QueueEntry:
    """One row of the controller work queue, for views."""

    controller: str
    key: str
    state: str
    due_at: int
    dirty: bool
    attempts: int
    runner_id: str | None
    lease_expires_at: int | None
    last_error: str | None
    updated_at: int


@record(frozen=True)
class CtlEvent:
    seq: int
    controller: str
    key: str
    uid: str | None
    type: str
    at: int
    message: str | None
    data: dict[str, Any]

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> CtlEvent:
        return cls(row["seq"], row["controller"], row["key"], row["uid"], row["type"], row["at"],
                   row["message"], json.loads(row["data"]))

    def public(self) -> dict[str, Any]:
        return {"seq": self.seq, "controller": self.controller, "key": self.key,
                "uid": self.uid, "type": self.type, "at": self.at, "message": self.message,
                "data": self.data}


@record(frozen=True)
class ReconcileEffect:
    controller: str
    key: str
    effect_key: str
    kind: str
    fingerprint: str
    generation: int
    state: str
    result: Any
    created_at: int
    updated_at: int

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ReconcileEffect:
        result = None if row["result"] is None else json.loads(row["result"])
        return cls(row["controller"], row["key"], row["effect_key"], row["kind"],
                   row["fingerprint"], row["generation"], row["state"], result,
                   row["created_at"], row["updated_at"])

    def public(self) -> dict[str, Any]:
        return {"effectKey": self.effect_key, "kind": self.kind, "fingerprint": self.fingerprint,
                "generation": self.generation, "state": self.state, "result": self.result,
                "createdAt": self.created_at, "updatedAt": self.updated_at}


@record(frozen=True)
class ChildRun:
    """One attempt of a child workflow: immutable but for ``state`` (reserved ->
    queued, or -> interrupted). ``run_state`` is the run queue's (None: no row)."""

    controller: str
    key: str
    request_key: str
    attempt: int
    workflow: str
    input_fingerprint: str
    run_id: str
    state: str
    created_at: int
    updated_at: int
    run_state: str | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ChildRun:
        return cls(row["controller"], row["key"], row["request_key"], row["attempt"],
                   row["workflow"], row["input_fingerprint"], row["run_id"], row["state"],
                   row["created_at"], row["updated_at"], row.get("run_state"))

    def public(self) -> dict[str, Any]:
        return {"requestKey": self.request_key, "attempt": self.attempt,
                "workflow": self.workflow, "inputFingerprint": self.input_fingerprint,
                "runId": self.run_id, "state": self.state, "runState": self.run_state,
                "createdAt": self.created_at, "updatedAt": self.updated_at}


@record(frozen=True)
class ChildEnded:
    """A child run that reached a terminal queue state (``children_ended_after``)."""

    seq: int
    controller: str
    key: str
    request_key: str
    attempt: int
    run_id: str
    run_state: str
