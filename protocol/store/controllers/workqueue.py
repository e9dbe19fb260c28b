"""The controller work queue: one row per (controller, key), claimed one reconcile at a time.

Owns every write to ``controller_queue`` but the enqueue inside other
writes (``core``): claiming a due key under a token and lease, renewal,
finishing with an outcome (settled / requeue / requeue_after / error with
exponential backoff and jitter / conflict), returning a dead runner's
claims, and the host's cheap reads (next due time, the queue). A claim is
fenced by its token alone; another runner ends it only on proof its holder
is gone (``release_reconciles``) or after watching its (token, lease)
unchanged for the claim's lease of its own monotonic time (``leasewatch``),
never by the wall clock; either way the abandoned reconcile counts as an
error attempt and its key waits out its backoff. ``due_at`` is wall-clock scheduling, not a claim
rule. Does not import sqlite3.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from ...errors import ClaimLost, LimitError, TransitionRefused
from ...limits import safe_error_message, validate_key
from ..backend import Tx
from ..base import _still_gone, new_token
from ..records import Gone
from .bounds import validate_controller_name, validate_resource_key
from .core import ACTIVE, QUEUED, watch_id
from .records import (
    CONFLICT,
    ERROR,
    REQUEUE,
    REQUEUE_AFTER,
    SETTLED,
    Conflict,
    Finished,
    Outcome,
    QueueEntry,
    ReconcileClaim,
)
from .resources import ResourceOps, _missing

BACKOFF_BASE_MS = 1_000
BACKOFF_MAX_MS = 60_000
BACKOFF_JITTER = 0.2
MAX_REQUEUE_AFTER_S = 7 * 24 * 3600
MIN_LEASE_MS = 100
_RESOURCE = "controller = ? AND key = ?"
_OUTCOMES = (SETTLED, REQUEUE, REQUEUE_AFTER, ERROR)
_EVENT = {SETTLED: "settled", REQUEUE: "requeued", REQUEUE_AFTER: "requeued",
          ERROR: "error", CONFLICT: "requeued"}

Rand = Callable[[], float]


def backoff_ms(attempts: int, rand: Rand) -> int:
    """The wait after the ``attempts``-th error in a row: 1 s doubling, +-20 %, at most 60 s.

    ``rand`` returns a float in [0, 1) (``random.random``; tests pass their own).
    """
    raw = BACKOFF_BASE_MS * 2 ** min(max(attempts, 1) - 1, 30)
    jitter = 1 + BACKOFF_JITTER * (2 * rand() - 1)
    return int(min(BACKOFF_MAX_MS, min(raw, BACKOFF_MAX_MS) * jitter))


def _names(controllers: Iterable[str]) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(validate_controller_name(c) for c in controllers))
    if not names:
        raise LimitError("claim_reconcile needs at least one controller name",
                         code="invalid_controller_name")
    return names


def _in(names: tuple[str, ...]) -> str:
    return "(" + ", ".join("?" * len(names)) + ")"


class CtlQueueOps(ResourceOps):
    def enqueue_reconcile(self, controller: str, key: str, *, delay_s: float = 0.0) -> str:
        """Queue (controller, key) due in ``delay_s``; deduplicated (see ``core``).

        Returns ``added``, ``sooner``, ``kept`` or ``dirty``. Refused for a
        resource that does not exist (``resource_not_found``).
        """
        validate_controller_name(controller)
        validate_resource_key(key)
        delay_ms = self._delay_ms(delay_s)
        now = self._now()
        with self._db.transaction() as tx:
            res = self._load_resource(tx, controller, key)
            if res is None:
                raise _missing(controller, key)
            how = self._ctl_enqueue(tx, controller, key, now, now + delay_ms)
            if how != "kept":
                self._ctl_event(tx, controller, key, res.uid, "enqueued", now, None,
                                {"how": how, "delayMs": delay_ms})
            return how

    @staticmethod
    def _delay_ms(seconds: float) -> int:
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) \
                or not math.isfinite(seconds) or not 0 <= seconds <= MAX_REQUEUE_AFTER_S:
            raise LimitError(f"a requeue delay must be 0 to {MAX_REQUEUE_AFTER_S} seconds",
                             code="invalid_delay")
        return int(seconds * 1000)

    def _stalled_reconciles(self, tx: Tx, names: tuple[str, ...] | None) -> list[dict[str, Any]]:
        """Active rows this store watched go their lease without progress.

        Every active row is looked at, so the watch sees each renewal and
        forgets rows no longer claimed.
        """
        rows = tx.all("SELECT controller, key, claim_token, lease_expires_at, lease_ms"
                      " FROM controller_queue WHERE state = ?", (ACTIVE,))
        self._ctl_watch.keep_only(watch_id(r["controller"], r["key"]) for r in rows)
        return [r for r in rows
                if self._ctl_watch.stale(watch_id(r["controller"], r["key"]), r["claim_token"],
                                         r["lease_expires_at"], r["lease_ms"])
                and (names is None or r["controller"] in names)]

    def watch_reconciles(self) -> None:
        """Look at every active row now (a host whose controller slots are all busy)."""
        with self._db.transaction(write=False) as tx:
            self._stalled_reconciles(tx, None)

    def claim_reconcile(self, controller_names: Iterable[str], runner_id: str,
                        lease_ms: int, *, rand: Rand | None = None) -> ReconcileClaim | None:
        """Claim one due key of these controllers not being reconciled, or None.

        The oldest due queued row. An active row whose claim this store
        watched go its lease without progress is abandoned first (its token
        fails every fence from then on): an error attempt, due after its
        backoff (``_abandon``), so a reconcile that kills or hangs its worker
        is retried ever more slowly, not at once. A queued key whose resource
        is gone leaves the queue. Event ``reconcile_started``.
        """
        names = _names(controller_names)
        validate_key(runner_id, "runner id")
        if not isinstance(lease_ms, int) or lease_ms < MIN_LEASE_MS:
            raise LimitError(f"a reconcile lease must be at least {MIN_LEASE_MS} ms",
                             code="invalid_lease")
        now = self._now()
        with self._db.transaction() as tx:
            for stale in self._stalled_reconciles(tx, names):
                self._abandon(tx, stale["claim_token"], now, rand, "lease_expired",
                              "its worker stopped renewing the lease (it died or hung)")
            for _ in range(64):  # rows of deleted resources are dropped on the way
                row = tx.one(f"SELECT * FROM controller_queue WHERE state = ? AND due_at <= ?"
                             f" AND controller IN {_in(names)} ORDER BY due_at, controller, key"
                             " LIMIT 1", (QUEUED, now, *names))
                if row is None:
                    return None
                res = self._load_resource(tx, row["controller"], row["key"])
                if res is None:
                    tx.execute(f"DELETE FROM controller_queue WHERE {_RESOURCE} AND state = ?"
                               " AND claim_token IS ?",
                               (row["controller"], row["key"], row["state"], row["claim_token"]))
                    continue
                token = new_token()
                lease = now + lease_ms
                if tx.execute(
                        "UPDATE controller_queue SET state = ?, runner_id = ?, claim_token = ?,"
                        " lease_expires_at = ?, lease_ms = ?, dirty = 0, updated_at = ?"
                        f" WHERE {_RESOURCE} AND state = ? AND claim_token IS ?"
                        " AND lease_expires_at IS ?",
                        (ACTIVE, runner_id, token, lease, lease_ms, now, row["controller"],
                         row["key"], row["state"], row["claim_token"],
                         row["lease_expires_at"])) != 1:
                    raise TransitionRefused(f"{row['controller']}/{row['key']} changed while it"
                                            " was being claimed")
                self._ctl_event(tx, res.controller, res.key, res.uid, "reconcile_started", now,
                                None, {"runnerId": runner_id, "attempts": row["attempts"],
                                       "generation": res.generation})
                return ReconcileClaim(res.controller, res.key, runner_id, token, lease, lease_ms,
                                      row["attempts"], res)
            return None

    def renew_reconcile(self, token: str) -> int:
        """Extend the claim ``token`` still holds; the new lease (``ClaimLost`` if lost).

        The lease is a lease ahead of now and always past the last one, so an
        observer sees every renewal as progress whatever the wall clock did.
        """
        validate_key(token, "claim token")
        now = self._now()
        with self._db.transaction() as tx:
            row = tx.one("SELECT controller, key, lease_expires_at, lease_ms FROM"
                         " controller_queue WHERE claim_token = ?", (token,))
            if row is None:
                raise ClaimLost("the reconcile claim is no longer held")
            lease = max(now + row["lease_ms"], row["lease_expires_at"] + 1)
            if tx.execute("UPDATE controller_queue SET lease_expires_at = ? WHERE claim_token = ?"
                          " AND lease_expires_at = ?", (lease, token,
                                                        row["lease_expires_at"])) != 1:
                raise ClaimLost("the reconcile claim is no longer held")
            return int(lease)

    def finish_reconcile(self, token: str, outcome: Outcome, *,
                         expected_version: int | None = None,
                         status_patch: dict[str, Any] | None = None,
                         rand: Rand | None = None) -> Finished:
        """End the reconcile ``token`` holds: write its status and its outcome together.

        With ``status_patch`` the status is written as ``write_status`` does
        (a CAS on ``expected_version``) in the same transaction; a lost race
        makes the outcome ``conflict``: queued again at once, attempts kept.
        ``settled`` leaves the queue (unless the key got dirty meanwhile: then
        it is due now); ``requeue`` is due now; ``requeue_after`` in its
        delay; ``error`` after ``backoff_ms(attempts + 1, rand)`` with the
        redacted, bounded message kept. Every outcome but ``error`` resets the
        attempt count. A resource deleted meanwhile leaves the queue. A token
        no longer current raises ``ClaimLost`` and writes nothing.
        """
        validate_key(token, "claim token")
        if outcome.kind not in _OUTCOMES:
            raise LimitError(f"unknown reconcile outcome {outcome.kind!r}", code="invalid_outcome")
        delay_ms = self._delay_ms(outcome.delay_s or 0.0) if outcome.kind == REQUEUE_AFTER else 0
        if status_patch is not None and expected_version is None:
            raise LimitError("a status patch needs the resource_version it was read at",
                             code="status_invalid")
        now = self._now()
        with self._db.transaction() as tx:
            row = tx.one("SELECT * FROM controller_queue WHERE claim_token = ?", (token,))
            if row is None:
                raise ClaimLost("the reconcile claim is no longer held")
            controller, key = row["controller"], row["key"]
            kind = outcome.kind
            res = self._load_resource(tx, controller, key)
            if res is not None and status_patch is not None and expected_version is not None:
                written = self._status_cas(tx, controller, key, expected_version, status_patch,
                                           now)
                if isinstance(written, Conflict):
                    kind = CONFLICT
                else:
                    res = written
            dirty = bool(tx.scalar(f"SELECT dirty FROM controller_queue WHERE {_RESOURCE}",
                                   (controller, key)))
            attempts = row["attempts"] + 1 if kind == ERROR else (
                row["attempts"] if kind == CONFLICT else 0)
            message = safe_error_message(outcome.error) if kind == ERROR else None
            due: int | None
            if kind == SETTLED:
                due = now if dirty else None
            elif kind == REQUEUE_AFTER:
                due = now if dirty else now + delay_ms
            elif kind == ERROR:
                if rand is None:
                    import random  # not on the read path

                    rand = random.random
                due = now + backoff_ms(attempts, rand)
            else:
                due = now
            if res is None:
                due = None
            if due is None:
                changed = tx.execute("DELETE FROM controller_queue WHERE claim_token = ?",
                                     (token,))
            else:
                changed = tx.execute(
                    "UPDATE controller_queue SET state = ?, due_at = ?, dirty = 0, attempts = ?,"
                    " runner_id = NULL, claim_token = NULL, lease_expires_at = NULL,"
                    " lease_ms = NULL, last_error = ?, updated_at = ? WHERE claim_token = ?",
                    (QUEUED, due, attempts, message, now, token))
            if changed != 1:
                raise ClaimLost("the reconcile claim is no longer held")
            if res is not None:
                self._ctl_event(tx, controller, key, res.uid, _EVENT[kind], now, message,
                                {"outcome": kind, "dueAt": due, "attempts": attempts,
                                 "dirty": dirty, "resourceVersion": res.resource_version})
            return Finished(controller, key, kind, due, attempts, dirty, res)

    def release_reconciles(self, gone: Gone, *, rand: Rand | None = None) -> int:
        """Return every reconcile claim of a runner proven gone to the queue.

        The proof is checked again inside the transaction (``Gone``); the
        count of keys returned. Each is abandoned (``_abandon``, reason
        ``runner_dead``): an error attempt, due after its backoff.
        """
        validate_key(gone.runner_id, "runner id")
        now = self._now()
        with self._db.transaction() as tx:
            if not _still_gone(tx, gone):
                return 0
            rows = tx.all("SELECT claim_token FROM controller_queue"
                          " WHERE state = ? AND runner_id = ?", (ACTIVE, gone.runner_id))
            for r in rows:
                self._abandon(tx, r["claim_token"], now, rand, "runner_dead",
                              f"its runner {gone.runner_id} died", first_at_once=True)
            return len(rows)

    def _abandon(self, tx: Tx, token: str, now: int, rand: Rand | None, reason: str,
                 why: str, *, first_at_once: bool = False) -> None:
        """The reconcile under ``token`` will never finish: count it as an error attempt.

        Its row is queued again after ``backoff_ms(attempts + 1)`` (at once,
        with ``first_at_once``, when this is its first attempt) with the
        reason kept as its last error, exactly as if it had raised: a
        reconcile that kills its worker (``os._exit``, a crash, a hang past
        its lease) backs off like one that fails. Event ``error`` (data
        ``reason``: ``lease_expired`` or ``runner_dead``). Its token fails
        every fence from now on.
        """
        row = tx.one("SELECT * FROM controller_queue WHERE claim_token = ?", (token,))
        if row is None:
            raise TransitionRefused("a reconcile claim changed while it was abandoned")
        attempts = row["attempts"] + 1
        if first_at_once and attempts == 1:
            due = now
        else:
            import random  # not on the read path

            due = now + backoff_ms(attempts, rand or random.random)
        message = safe_error_message(f"the reconcile was abandoned: {why}")
        if tx.execute(
                "UPDATE controller_queue SET state = ?, due_at = ?, dirty = 0, attempts = ?,"
                " runner_id = NULL, claim_token = NULL, lease_expires_at = NULL,"
                " lease_ms = NULL, last_error = ?, updated_at = ? WHERE claim_token = ?",
                (QUEUED, due, attempts, message, now, token)) != 1:
            raise TransitionRefused(f"{row['controller']}/{row['key']} changed concurrently")
        res = self._load_resource(tx, row["controller"], row["key"])
        self._ctl_event(tx, row["controller"], row["key"], res.uid if res else None, "error",
                        now, message, {"outcome": "error", "reason": reason,
                                       "runnerId": row["runner_id"], "dueAt": due,
                                       "attempts": attempts})

    # ---- reads -------------------------------------------------------------

    def next_reconcile_due(self, controller_names: Iterable[str]) -> int | None:
        """The earliest ``due_at`` (epoch ms) of a queued key of these controllers, or None.

        One indexed read: the host sleeps until then (or a wakeup).
        """
        names = _names(controller_names)
        with self._db.transaction(write=False) as tx:
            value = tx.scalar(f"SELECT min(due_at) FROM controller_queue WHERE state = ?"
                              f" AND controller IN {_in(names)}", (QUEUED, *names))
        return None if value is None else int(value)

    def reconcile_queue(self, controller: str | None = None) -> list[QueueEntry]:
        """The work queue's rows (for views), by due time."""
        if controller is not None:
            validate_controller_name(controller)
        where, params = ("WHERE controller = ?", (controller,)) if controller else ("", ())
        with self._db.transaction(write=False) as tx:
            rows = tx.all(f"SELECT * FROM controller_queue {where} ORDER BY due_at, controller,"
                          " key", params)
        return [_entry(r) for r in rows]

    def queue_entry(self, controller: str, key: str) -> QueueEntry | None:
        """The key's queue row (None: not queued, nothing to do for it)."""
        validate_controller_name(controller)
        validate_resource_key(key)
        with self._db.transaction(write=False) as tx:
            row = tx.one(f"SELECT * FROM controller_queue WHERE {_RESOURCE}", (controller, key))
        return None if row is None else _entry(row)


def _entry(r: dict[str, Any]) -> QueueEntry:
    return QueueEntry(r["controller"], r["key"], r["state"], r["due_at"], bool(r["dirty"]),
                      r["attempts"], r["runner_id"], r["lease_expires_at"], r["last_error"],
                      r["updated_at"])
