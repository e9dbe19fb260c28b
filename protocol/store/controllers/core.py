"""What every controller mixin shares, inside the caller's transaction.

Owns loading a resource row, appending a (bounded, redacted) controller
event and pruning a resource's events to the last ``MAX_EVENTS_PER_RESOURCE``,
queueing a key (deduplicated; a key being reconciled is marked dirty), the
reconcile fence (by claim token alone), and deleting a resource once
deletion was requested and no finalizer is left. Public operations live in
the sibling modules. Does not import sqlite3.
"""

from __future__ import annotations

from typing import Any

from ...errors import ClaimLost, TransitionRefused
from ...limits import encode_payload, safe_error_message
from ..backend import Tx
from ..base import StoreBase
from ..leasewatch import LeaseWatch
from .records import Resource

MAX_EVENTS_PER_RESOURCE = 200
QUEUED = "queued"
ACTIVE = "active"
_RESOURCE = "controller = ? AND key = ?"


def watch_id(controller: str, key: str) -> str:
    """The lease watch's name for a queue row (one watch per store, for reconciles)."""
    return f"{controller}\x1f{key}"


class CtlBase(StoreBase):
    """Shared state: ``_ctl_watch`` judges reconcile claims (runs have their own)."""

    _ctl_watch: LeaseWatch

    @staticmethod
    def _load_resource(tx: Tx, controller: str, key: str) -> Resource | None:
        row = tx.one(f"SELECT * FROM controller_resources WHERE {_RESOURCE}", (controller, key))
        return None if row is None else Resource.from_row(row)

    @staticmethod
    def _ctl_event(tx: Tx, controller: str, key: str, uid: str | None, type_: str, at: int,
                   message: object = None, data: dict[str, Any] | None = None) -> int:
        """Append one event; keep only the resource's last ``MAX_EVENTS_PER_RESOURCE``.

        ``message`` is redacted and bounded (``safe_error_message``); ``data``
        is bounded to 64 KiB like every feed payload.
        """
        text = None if message is None else safe_error_message(message)
        seq = tx.insert(
            "INSERT INTO controller_events(controller, key, uid, type, at, message, data)"
            " VALUES (?,?,?,?,?,?,?)",
            (controller, key, uid, type_, at, text,
             encode_payload(data or {}, "controller event data")))
        tx.execute(
            f"DELETE FROM controller_events WHERE {_RESOURCE} AND seq <= ("
            f"SELECT seq FROM controller_events WHERE {_RESOURCE}"
            " ORDER BY seq DESC LIMIT 1 OFFSET ?)",
            (controller, key, controller, key, MAX_EVENTS_PER_RESOURCE))
        return seq

    @staticmethod
    def _ctl_enqueue(tx: Tx, controller: str, key: str, now: int, due_at: int | None = None
                     ) -> str:
        """Queue the key (due ``due_at``, default now); returns what happened.

        ``added``: a new row; ``sooner``: a queued row made due earlier;
        ``kept``: a queued row already due by then, or a key already marked
        dirty; ``dirty``: the key is being reconciled and is now marked, so
        it runs again (once) after that reconcile ends.
        """
        due = now if due_at is None else due_at
        row = tx.one(f"SELECT state, due_at, dirty FROM controller_queue WHERE {_RESOURCE}",
                     (controller, key))
        if row is None:
            tx.execute("INSERT INTO controller_queue(controller, key, state, due_at, enqueued_at,"
                       " updated_at) VALUES (?,?,?,?,?,?)",
                       (controller, key, QUEUED, due, now, now))
            return "added"
        if row["state"] == ACTIVE:
            if row["dirty"]:
                return "kept"
            if tx.execute(f"UPDATE controller_queue SET dirty = 1, updated_at = ?"
                          f" WHERE {_RESOURCE} AND state = ? AND dirty = 0",
                          (now, controller, key, ACTIVE)) != 1:
                raise TransitionRefused(f"{controller}/{key} changed concurrently")
            return "dirty"
        if row["due_at"] <= due:
            return "kept"
        tx.execute(f"UPDATE controller_queue SET due_at = ?, updated_at = ? WHERE {_RESOURCE}"
                   " AND state = ?", (due, now, controller, key, QUEUED))
        return "sooner"

    @staticmethod
    def _ctl_fence(tx: Tx, controller: str, key: str, token: str | None) -> None:
        """A write on behalf of a reconcile needs its claim (by token, never by clock)."""
        if token is None:
            return
        held = tx.scalar(f"SELECT claim_token FROM controller_queue WHERE {_RESOURCE}",
                         (controller, key))
        if held is None or held != token:
            raise ClaimLost(f"the reconcile claim on {controller}/{key} is no longer held")

    def _delete_if_done(self, tx: Tx, res: Resource, now: int) -> bool:
        """Delete the row (and its effects and child records) if deletion was
        requested and no finalizer is left; True if it was deleted.

        A queue row not being reconciled goes with it; an active one is
        dropped when its reconcile finishes. Events stay (bounded per key).
        """
        if not res.deletion_requested or res.finalizers:
            return False
        args = (res.controller, res.key)
        if tx.execute(f"DELETE FROM controller_resources WHERE {_RESOURCE} AND uid = ?"
                      " AND resource_version = ?", (*args, res.uid, res.resource_version)) != 1:
            return False
        tx.execute(f"DELETE FROM controller_effects WHERE {_RESOURCE}", args)
        tx.execute(f"DELETE FROM controller_children WHERE {_RESOURCE}", args)
        tx.execute(f"DELETE FROM controller_queue WHERE {_RESOURCE} AND state = ?",
                   (*args, QUEUED))
        self._ctl_event(tx, res.controller, res.key, res.uid, "deleted", now)
        return True
