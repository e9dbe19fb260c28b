"""Child runs of reconciles: one immutable record per (controller, key, request key, attempt).

Owns ``controller_children``. A record names its workflow, input
fingerprint and a run id reserved before the run exists (``reserved``);
``enqueue_child`` queues that run with the run queue's own insert (a
detached run, ``QueueOps``) and marks the record ``queued`` in the same
transaction, so neither exists without the other's commit. An attempt whose
run was lost is marked ``interrupted``; the next reservation is a new
attempt with a new run id. A child run that ends queues its parent resource
in the transaction that ended it (``_after_run_ended``). Does not import
sqlite3.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...errors import ConflictError, NotFound, TransitionRefused
from ...limits import validate_run_id
from ...states import TERMINAL, sql_list
from ..backend import Tx
from ..queue import QueueOps
from ..records import RunSource
from .bounds import validate_controller_name, validate_resource_key
from .core import CtlBase
from .records import ChildEnded, ChildRun

_SELECT = ("SELECT c.*, q.state AS run_state FROM controller_children AS c"
           " LEFT JOIN workflow_run_queue AS q ON q.run_id = c.run_id")
_BATCH = 500  # run ids per IN (...): under SQLite's bound on bound parameters
_ATTEMPT = "c.controller = ? AND c.key = ? AND c.request_key = ?"


def _check(controller: str, key: str, request_key: str) -> None:
    validate_controller_name(controller)
    validate_resource_key(key)
    validate_resource_key(request_key, "request key")


def _latest(tx: Tx, controller: str, key: str, request_key: str) -> ChildRun | None:
    row = tx.one(f"{_SELECT} WHERE {_ATTEMPT} ORDER BY c.attempt DESC LIMIT 1",
                 (controller, key, request_key))
    return None if row is None else ChildRun.from_row(row)


def _by_run(tx: Tx, run_id: str) -> ChildRun | None:
    row = tx.one(f"{_SELECT} WHERE c.run_id = ?", (run_id,))
    return None if row is None else ChildRun.from_row(row)


class CtlChildOps(CtlBase, QueueOps):
    def _reserve_in(self, tx: Tx, controller: str, key: str, request_key: str, workflow: str,
                    input_fingerprint: str, run_id: str, now: int) -> tuple[ChildRun, bool]:
        latest = _latest(tx, controller, key, request_key)
        if latest is not None and latest.state != "interrupted":
            if (latest.workflow, latest.input_fingerprint) != (workflow, input_fingerprint):
                raise ConflictError(
                    f"child {request_key} of {controller}/{key} was started with another"
                    " workflow or input; a request key names one request: use another key",
                    code="child_request_changed")
            return latest, False
        attempt = 1 if latest is None else latest.attempt + 1
        if tx.one("SELECT 1 FROM workflow_run_queue WHERE run_id = ?", (run_id,)) or \
                tx.one("SELECT 1 FROM controller_children WHERE run_id = ?", (run_id,)):
            raise ConflictError(f"run {run_id} already exists", code="run_exists")
        tx.execute("INSERT INTO controller_children(controller, key, request_key, attempt,"
                   " workflow, input_fingerprint, run_id, state, created_at, updated_at)"
                   " VALUES (?,?,?,?,?,?,?,'reserved',?,?)",
                   (controller, key, request_key, attempt, workflow, input_fingerprint, run_id,
                    now, now))
        uid = tx.scalar("SELECT uid FROM controller_resources WHERE controller = ? AND key = ?",
                        (controller, key))
        self._ctl_event(tx, controller, key, uid, "child_reserved", now, None,
                        {"requestKey": request_key, "attempt": attempt, "runId": run_id,
                         "workflow": workflow})
        out = _latest(tx, controller, key, request_key)
        assert out is not None
        return out, True

    def _enqueue_in(self, tx: Tx, child: ChildRun, source: RunSource, private_input: Any,
                    agent_dir: str | None, now: int) -> ChildRun:
        if child.state != "reserved":
            raise TransitionRefused(f"child run {child.run_id} is {child.state}, not reserved",
                                    code="child_not_reserved")
        if source.workflow != child.workflow:
            raise ConflictError(f"child run {child.run_id} was reserved for workflow"
                                f" {child.workflow}, not {source.workflow}",
                                code="child_request_changed")
        self._insert(child.run_id, source, private_input, origin_session=None,
                     parent_run_id=None, runner_affinity=None, claim_runner=None,
                     agent_dir=agent_dir, tx=tx)
        if tx.execute("UPDATE controller_children SET state = 'queued', updated_at = ?"
                      " WHERE run_id = ? AND state = 'reserved'", (now, child.run_id)) != 1:
            raise TransitionRefused(f"child run {child.run_id} changed concurrently")
        uid = tx.scalar("SELECT uid FROM controller_resources WHERE controller = ? AND key = ?",
                        (child.controller, child.key))
        self._ctl_event(tx, child.controller, child.key, uid, "child_started", now, None,
                        {"requestKey": child.request_key, "attempt": child.attempt,
                         "runId": child.run_id, "workflow": child.workflow})
        out = _by_run(tx, child.run_id)
        assert out is not None
        return out

    # ---- public operations ----------------------------------------------

    def reserve_child(self, controller: str, key: str, request_key: str, *, workflow: str,
                      input_fingerprint: str, run_id: str, token: str
                      ) -> tuple[ChildRun, bool]:
        """Save the attempt's record with its run id, before the run is queued.

        Returns (record, created). The latest attempt, if not interrupted, is
        returned as it is when workflow and fingerprint match
        (``child_request_changed`` otherwise); after an interrupted one a new
        attempt is reserved under ``run_id``. Fenced by the claim ``token``.
        """
        _check(controller, key, request_key)
        validate_resource_key(workflow, "workflow name")
        validate_resource_key(input_fingerprint, "input fingerprint")
        validate_run_id(run_id)
        now = self._now()
        with self._db.transaction() as tx:
            self._ctl_fence(tx, controller, key, token)
            return self._reserve_in(tx, controller, key, request_key, workflow,
                                    input_fingerprint, run_id, now)

    def enqueue_child(self, run_id: str, source: RunSource, private_input: Any, *, token: str,
                      agent_dir: str | None = None) -> ChildRun:
        """Queue the reserved child run (a detached run) and mark its record ``queued``,
        in one transaction: a failure anywhere leaves both as they were."""
        validate_run_id(run_id)
        now = self._now()
        with self._db.transaction() as tx:
            child = _by_run(tx, run_id)
            if child is None:
                raise NotFound(f"no child run {run_id} was reserved", code="child_not_found")
            self._ctl_fence(tx, child.controller, child.key, token)
            return self._enqueue_in(tx, child, source, private_input, agent_dir, now)

    def start_child(self, controller: str, key: str, request_key: str, *, source: RunSource,
                    input_fingerprint: str, private_input: Any, run_id: str, token: str,
                    agent_dir: str | None = None) -> tuple[ChildRun, bool]:
        """``reserve_child`` and ``enqueue_child`` in one transaction; returns (record,
        created). An existing attempt is returned as it is (queued or still reserved)."""
        _check(controller, key, request_key)
        validate_resource_key(input_fingerprint, "input fingerprint")
        validate_run_id(run_id)
        now = self._now()
        with self._db.transaction() as tx:
            self._ctl_fence(tx, controller, key, token)
            child, created = self._reserve_in(tx, controller, key, request_key, source.workflow,
                                              input_fingerprint, run_id, now)
            if not created:
                return child, False
            return self._enqueue_in(tx, child, source, private_input, agent_dir, now), True

    def mark_child_interrupted(self, run_id: str, reason: str, *, token: str | None = None
                               ) -> ChildRun:
        """The attempt's run was lost (its runner died, it was never queued): the next
        reservation is a new attempt. Queues the parent; interrupted again: a no-op."""
        validate_run_id(run_id)
        now = self._now()
        with self._db.transaction() as tx:
            child = _by_run(tx, run_id)
            if child is None:
                raise NotFound(f"no child run {run_id}", code="child_not_found")
            self._ctl_fence(tx, child.controller, child.key, token)
            if child.state == "interrupted":
                return child
            if tx.execute("UPDATE controller_children SET state = 'interrupted', updated_at = ?"
                          " WHERE run_id = ? AND state = ?", (now, run_id, child.state)) != 1:
                raise TransitionRefused(f"child run {run_id} changed concurrently")
            uid = tx.scalar("SELECT uid FROM controller_resources WHERE controller = ? AND"
                            " key = ?", (child.controller, child.key))
            self._ctl_event(tx, child.controller, child.key, uid, "child_interrupted", now,
                            reason, {"requestKey": child.request_key, "attempt": child.attempt,
                                     "runId": run_id})
            if uid is not None:
                self._ctl_enqueue(tx, child.controller, child.key, now)
            out = _by_run(tx, run_id)
        assert out is not None
        return out

    def _after_run_ended(self, tx: Tx, run_id: str, state: str, now: int) -> None:
        """A child run ended: queue its parent resource (event ``child_ended``)."""
        child = _by_run(tx, run_id)
        if child is None:
            return
        uid = tx.scalar("SELECT uid FROM controller_resources WHERE controller = ? AND key = ?",
                        (child.controller, child.key))
        if uid is None:
            return
        self._ctl_event(tx, child.controller, child.key, uid, "child_ended", now, None,
                        {"requestKey": child.request_key, "attempt": child.attempt,
                         "runId": run_id, "runState": state})
        self._ctl_enqueue(tx, child.controller, child.key, now)

    # ---- reads -------------------------------------------------------------

    def child_for(self, controller: str, key: str, request_key: str) -> ChildRun | None:
        """The latest attempt for this request key (with its run's queue state)."""
        _check(controller, key, request_key)
        with self._db.transaction(write=False) as tx:
            return _latest(tx, controller, key, request_key)

    def child_by_run(self, run_id: str) -> ChildRun | None:
        """The child record of a run, if it is one (run id -> resource)."""
        validate_run_id(run_id)
        with self._db.transaction(write=False) as tx:
            return _by_run(tx, run_id)

    def children_by_runs(self, run_ids: Iterable[str]) -> dict[str, ChildRun]:
        """The child records of those of ``run_ids`` that are child runs, by run id.

        One read per ``_BATCH`` ids (a listing asks about every detached run
        it shows, in one call); ids that are no child are left out.
        """
        ids = sorted({validate_run_id(r) for r in run_ids})
        out: dict[str, ChildRun] = {}
        with self._db.transaction(write=False) as tx:
            for at in range(0, len(ids), _BATCH):
                part = ids[at:at + _BATCH]
                rows = tx.all(f"{_SELECT} WHERE c.run_id IN ({', '.join('?' * len(part))})",
                              tuple(part))
                out.update((r["run_id"], ChildRun.from_row(r)) for r in rows)
        return out

    def children_of(self, controller: str, key: str) -> list[ChildRun]:
        """Every attempt of every child of the resource (for ``get``)."""
        validate_controller_name(controller)
        validate_resource_key(key)
        with self._db.transaction(write=False) as tx:
            rows = tx.all(f"{_SELECT} WHERE c.controller = ? AND c.key = ?"
                          " ORDER BY c.created_at, c.request_key, c.attempt", (controller, key))
        return [ChildRun.from_row(r) for r in rows]

    def children_ended_after(self, after_seq: int, *, limit: int = 500) -> list[ChildEnded]:
        """Child runs that reached a terminal state in ``run_events`` after ``after_seq``.

        A catch-up read (the store already queues the parent when a child
        ends): oldest first, each with the event's ``seq``.
        """
        with self._db.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT e.seq, e.type, c.controller, c.key, c.request_key, c.attempt, c.run_id"
                " FROM run_events AS e JOIN controller_children AS c ON c.run_id = e.run_id"
                f" WHERE e.seq > ? AND e.type IN {sql_list(TERMINAL)} ORDER BY e.seq LIMIT ?",
                (int(after_seq), max(1, min(int(limit), 1000))))
        return [ChildEnded(r["seq"], r["controller"], r["key"], r["request_key"], r["attempt"],
                           r["run_id"], r["type"]) for r in rows]
