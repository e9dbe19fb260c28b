"""Controller resources: spec by the caller, status by the controller, deletion by finalizers.

Owns every write to ``controller_resources``. Each is one transaction and a
compare-and-set on ``resource_version`` (bumped by every write) whose row
count is checked; ``generation`` moves only when the spec changes. A status
write that loses its race returns ``Conflict``, records a ``conflict`` event
and queues the key at once: never a lost update. Does not import sqlite3.
"""

from __future__ import annotations

from typing import Any

from ...errors import ConflictError, LimitError, NotFound
from ..backend import Tx
from ..base import new_token
from .bounds import (
    MAX_FINALIZERS,
    empty_status,
    encode_document,
    merge_status,
    validate_controller_name,
    validate_resource_key,
)
from .core import CtlBase
from .records import Applied, Conflict, Deleted, Resource

_RESOURCE = "controller = ? AND key = ?"
# A status whose conditions hold {"type": "Ready", "status": "true"}: JSON in SQL
# is where the two engines differ, so the test is written once for each.
_READY = {
    "sqlite": "SELECT 1 FROM json_each(json_extract(status, '$.conditions')) AS c"
              " WHERE json_extract(c.value, '$.type') = 'Ready'"
              " AND json_extract(c.value, '$.status') = 'true'",
    "postgres": "SELECT 1 FROM jsonb_array_elements(CASE WHEN"
                " jsonb_typeof(status::jsonb -> 'conditions') = 'array'"
                " THEN status::jsonb -> 'conditions' ELSE '[]'::jsonb END) AS c"
                " WHERE c -> 'type' = '\"Ready\"'::jsonb AND c -> 'status' = '\"true\"'::jsonb",
}


def _missing(controller: str, key: str) -> NotFound:
    return NotFound(f"no resource {key} of controller {controller}", code="resource_not_found")


class ResourceOps(CtlBase):
    # ---- inside a transaction ---------------------------------------------

    def _cas(self, tx: Tx, res: Resource, now: int, *, sets: str, params: tuple[Any, ...]
             ) -> Resource:
        """Bump ``resource_version`` with ``sets``, as a CAS on the version read."""
        changed = tx.execute(
            "UPDATE controller_resources SET resource_version = resource_version + 1,"
            f" updated_at = ?{sets} WHERE {_RESOURCE} AND resource_version = ?",
            (now, *params, res.controller, res.key, res.resource_version))
        if changed != 1:  # cannot happen inside one write transaction; checked all the same
            raise ConflictError(f"resource {res.controller}/{res.key} changed concurrently",
                                code="resource_conflict")
        out = self._load_resource(tx, res.controller, res.key)
        assert out is not None
        return out

    def _lost(self, tx: Tx, res: Resource, expected: int, what: str, now: int) -> Conflict:
        self._ctl_event(tx, res.controller, res.key, res.uid, "conflict", now,
                        f"{what} expected resource_version {expected}, found"
                        f" {res.resource_version}; queued again",
                        {"expected": expected, "actual": res.resource_version, "write": what})
        self._ctl_enqueue(tx, res.controller, res.key, now)
        return Conflict(res.controller, res.key, expected, res.resource_version)

    def _status_cas(self, tx: Tx, controller: str, key: str, expected_version: int,
                    patch: dict[str, Any], now: int) -> Resource | Conflict:
        res = self._load_resource(tx, controller, key)
        if res is None:
            raise _missing(controller, key)
        if res.resource_version != expected_version:
            return self._lost(tx, res, expected_version, "status", now)
        status = merge_status(res.status, patch, res.generation, now)
        if status == res.status:
            return res
        return self._cas(tx, res, now, sets=", status = ?",
                         params=(encode_document(status, "status"),))

    # ---- public operations ----------------------------------------------

    def apply_spec(self, controller: str, key: str, spec: Any, *,
                   initial_status: dict[str, Any] | None = None) -> Applied:
        """Create the resource or replace its spec, and queue it (one transaction).

        A new resource starts at resource_version 1, generation 1, with
        ``initial_status`` (a status patch) over the empty status: event
        ``applied``. A different spec bumps generation and resource_version:
        event ``spec_changed``. The same spec is a no-op (nothing moves, no
        event, nothing queued). A resource whose deletion was requested
        refuses a new spec (``resource_deleting``).
        """
        validate_controller_name(controller)
        validate_resource_key(key)
        text = encode_document(spec, "spec")
        now = self._now()
        with self._db.transaction() as tx:
            res = self._load_resource(tx, controller, key)
            if res is None:
                status = merge_status(empty_status(), initial_status or {}, 1, now)
                uid = "res-" + new_token()
                tx.execute(
                    "INSERT INTO controller_resources(controller, key, uid, resource_version,"
                    " generation, spec, status, created_at, updated_at)"
                    " VALUES (?,?,?,1,1,?,?,?,?)",
                    (controller, key, uid, text, encode_document(status, "status"), now, now))
                self._ctl_event(tx, controller, key, uid, "applied", now, None,
                                {"generation": 1})
                self._ctl_enqueue(tx, controller, key, now)
                created = self._load_resource(tx, controller, key)
                assert created is not None
                return Applied(created, True, True)
            if res.deletion_requested:
                raise ConflictError(f"resource {controller}/{key} is being deleted; apply it"
                                    " again once it is gone", code="resource_deleting")
            if encode_document(res.spec, "spec") == text:
                return Applied(res, False, False)
            out = self._cas(tx, res, now, sets=", spec = ?, generation = generation + 1",
                            params=(text,))
            self._ctl_event(tx, controller, key, out.uid, "spec_changed", now, None,
                            {"generation": out.generation})
            self._ctl_enqueue(tx, controller, key, now)
            return Applied(out, False, True)

    def write_status(self, controller: str, key: str, expected_version: int,
                     patch: dict[str, Any], *, token: str | None = None) -> Resource | Conflict:
        """Patch the status if ``resource_version`` is still ``expected_version``.

        ``patch`` may set ``observed_generation``, ``conditions`` (merged by
        type; ``last_transition`` kept while a condition's status stays),
        ``workflow_run`` and ``controller_status``. A lost race returns
        ``Conflict`` (event ``conflict``, key queued at once). With ``token``
        the write is fenced by the reconcile's claim (``ClaimLost``). An
        unchanged status writes nothing.
        """
        validate_controller_name(controller)
        validate_resource_key(key)
        now = self._now()
        with self._db.transaction() as tx:
            self._ctl_fence(tx, controller, key, token)
            return self._status_cas(tx, controller, key, expected_version, patch, now)

    def request_delete(self, controller: str, key: str) -> Resource | Deleted:
        """Mark the resource for deletion and queue it; with no finalizer left it is
        deleted at once (``Deleted``). Asking again is a no-op."""
        validate_controller_name(controller)
        validate_resource_key(key)
        now = self._now()
        with self._db.transaction() as tx:
            res = self._load_resource(tx, controller, key)
            if res is None:
                raise _missing(controller, key)
            if not res.deletion_requested:
                res = self._cas(tx, res, now, sets=", deletion_requested = 1", params=())
                self._ctl_event(tx, controller, key, res.uid, "delete_requested", now, None,
                                {"finalizers": list(res.finalizers)})
            if self._delete_if_done(tx, res, now):
                return Deleted(controller, key, res.uid)
            self._ctl_enqueue(tx, controller, key, now)
            return res

    def add_finalizer(self, controller: str, key: str, name: str, expected_version: int, *,
                      token: str | None = None) -> Resource | Conflict:
        """Add ``name`` to the finalizers (CAS on ``resource_version``); present: a no-op.
        Refused once deletion was requested (``resource_deleting``)."""
        validate_controller_name(controller)
        validate_resource_key(key)
        validate_resource_key(name, "finalizer")
        now = self._now()
        with self._db.transaction() as tx:
            self._ctl_fence(tx, controller, key, token)
            res = self._load_resource(tx, controller, key)
            if res is None:
                raise _missing(controller, key)
            if res.resource_version != expected_version:
                return self._lost(tx, res, expected_version, "add_finalizer", now)
            if name in res.finalizers:
                return res
            if res.deletion_requested:
                raise ConflictError(f"resource {controller}/{key} is being deleted; no"
                                    " finalizer can be added", code="resource_deleting")
            if len(res.finalizers) >= MAX_FINALIZERS:
                raise LimitError(f"a resource holds at most {MAX_FINALIZERS} finalizers",
                                 code="too_many_finalizers")
            return self._cas(tx, res, now, sets=", finalizers = ?",
                             params=(encode_document([*res.finalizers, name], "finalizers"),))

    def remove_finalizer(self, controller: str, key: str, name: str, expected_version: int, *,
                         token: str | None = None) -> Resource | Conflict | Deleted:
        """Remove ``name`` (CAS on ``resource_version``); absent: a no-op. Once
        deletion was requested and the last finalizer goes, the row is deleted
        in the same transaction (``Deleted``)."""
        validate_controller_name(controller)
        validate_resource_key(key)
        validate_resource_key(name, "finalizer")
        now = self._now()
        with self._db.transaction() as tx:
            self._ctl_fence(tx, controller, key, token)
            res = self._load_resource(tx, controller, key)
            if res is None:
                raise _missing(controller, key)
            if res.resource_version != expected_version:
                return self._lost(tx, res, expected_version, "remove_finalizer", now)
            if name not in res.finalizers:
                return res
            left = [f for f in res.finalizers if f != name]
            out = self._cas(tx, res, now, sets=", finalizers = ?",
                            params=(encode_document(left, "finalizers"),))
            self._ctl_event(tx, controller, key, out.uid, "finalizer_removed", now, None,
                            {"finalizer": name})
            if self._delete_if_done(tx, out, now):
                return Deleted(controller, key, out.uid)
            return out

    # ---- reads -------------------------------------------------------------

    def get_resource(self, controller: str, key: str) -> Resource | None:
        validate_controller_name(controller)
        validate_resource_key(key)
        with self._db.transaction(write=False) as tx:
            return self._load_resource(tx, controller, key)

    def list_resources(self, controller: str | None = None, *, limit: int = 1000
                       ) -> list[Resource]:
        """Resources by controller and key (``limit`` at most)."""
        if controller is not None:
            validate_controller_name(controller)
        where, params = ("WHERE controller = ?", (controller,)) if controller else ("", ())
        with self._db.transaction(write=False) as tx:
            rows = tx.all(f"SELECT * FROM controller_resources {where} ORDER BY controller, key"
                          " LIMIT ?", (*params, int(limit)))
        return [Resource.from_row(r) for r in rows]

    def count_not_ready(self, controller: str | None = None) -> int:
        """Resources whose ``Ready`` condition is not ``true`` (the Pi footer's count)."""
        if controller is not None:
            validate_controller_name(controller)
        where, params = ("WHERE controller = ?", (controller,)) if controller else ("", ())
        with self._db.transaction(write=False) as tx:
            ready = tx.scalar(
                f"SELECT count(*) FROM controller_resources {where}"
                f" {'AND' if controller else 'WHERE'} EXISTS ({_READY[tx.dialect]})", params)
            total = tx.scalar(f"SELECT count(*) FROM controller_resources {where}", params)
        return int(total or 0) - int(ready or 0)
