"""Typed records returned by the store (plain data, no behaviour).

Imports nothing from the package but ``protocol.states``.
"""

from __future__ import annotations

import json
from typing import Any

from ..record import record
from ..states import QueueState


@record(frozen=True)
class RunSource:
    """What a run is launched from: pinned at enqueue time."""

    workflow: str
    source_path: str
    source_sha256: str
    definition_digest: str


@record(frozen=True)
class QueueRow:
    run_id: str
    workflow: str
    source_path: str
    source_sha256: str
    definition_digest: str
    state: QueueState
    origin_session: str | None
    notify_session: str | None
    runner_affinity: str | None
    runner_id: str | None
    claim_token: str | None
    lease_expires_at: int | None
    parent_run_id: str | None
    forked_from: str | None
    fork_node: str | None
    cancel_requested: bool
    error_code: str | None
    error_message: str | None
    created_at: int
    updated_at: int
    started_at: int | None
    finished_at: int | None
    has_private_input: bool

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> QueueRow:
        data = dict(row)
        data["has_private_input"] = data.pop("private_input", None) is not None
        data["cancel_requested"] = bool(data["cancel_requested"])
        data["state"] = QueueState(data["state"])
        return cls(**data)

    def public(self) -> dict[str, Any]:
        """A JSON view that never contains the private input."""
        return {
            "runId": self.run_id,
            "workflow": self.workflow,
            "queueState": self.state,
            "originSession": self.origin_session,
            "notifySession": self.notify_session,
            "runnerId": self.runner_id,
            "leaseExpiresAt": self.lease_expires_at,
            "parentRunId": self.parent_run_id,
            "forkedFrom": self.forked_from,
            "forkNode": self.fork_node,
            "cancelRequested": self.cancel_requested,
            "errorCode": self.error_code,
            "error": self.error_message,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
        }


@record(frozen=True)
class Claim:
    """Proof of ownership of one run, returned by every claiming operation."""

    run_id: str
    runner_id: str
    token: str
    lease_expires_at: int
    state: QueueState
    previous_state: QueueState


@record(frozen=True)
class Gone:
    """A caller's proof that a claim's holder is gone, checked again in the claiming CAS.

    ``pid`` None: the holder had no ``runners`` row (every live runner keeps
    one while it holds claims). Otherwise its row named this process, which
    the caller proved dead on this machine (``protocol.liveness``).
    """

    runner_id: str
    pid: int | None = None
    pid_start_time: float | None = None


@record(frozen=True)
class Renewal:
    lease_expires_at: int
    cancel_requested: bool
    pause_requested: bool = False  # ``pause``: park, paused, at the next boundary


@record(frozen=True)
class RunEvent:
    seq: int
    run_id: str
    type: str
    at: int
    payload: dict[str, Any]

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RunEvent:
        return cls(row["seq"], row["run_id"], row["type"], row["at"], json.loads(row["payload"]))


@record(frozen=True)
class RunnerRow:
    runner_id: str
    kind: str
    pid: int
    pid_start_time: float
    host_name: str
    started_at: int
    heartbeat_at: int


@record(frozen=True)
class Notification:
    id: int
    session_id: str
    run_id: str
    node_id: str
    idx: int
    kind: str
    payload: dict[str, Any]
    created_at: int
    delivery_token: str | None
    delivered_at: int | None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Notification:
        return cls(
            row["id"], row["session_id"], row["run_id"], row["node_id"], row["idx"], row["kind"],
            json.loads(row["payload"]), row["created_at"], row["delivery_token"],
            row["delivered_at"],
        )


@record(frozen=True)
class TurnIntent:
    intent_id: str
    session_id: str
    run_id: str
    source_event: str
    cause: str
    payload: dict[str, Any]
    state: str
    claim_token: str | None
    created_at: int
    resolved_at: int | None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> TurnIntent:
        return cls(
            row["intent_id"], row["session_id"], row["run_id"], row["source_event"],
            row["cause"], json.loads(row["payload"]), row["state"], row["claim_token"],
            row["created_at"], row["resolved_at"],
        )


@record(frozen=True)
class Effect:
    run_id: str
    node_id: str
    effect_key: str
    fingerprint: str
    state: str
    attempt_id: str | None
    result: Any
    created_at: int
    updated_at: int

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Effect:
        result = json.loads(row["result"]) if row["result"] is not None else None
        return cls(
            row["run_id"], row["node_id"], row["effect_key"], row["fingerprint"], row["state"],
            row["attempt_id"], result, row["created_at"], row["updated_at"],
        )
