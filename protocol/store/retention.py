"""Retention: which settled chains of runs may be forgotten, and forgetting them.

Owns the store's side of ``pi-workflows gc``: grouping runs into chains (the
runs linked by ``parent_run_id`` or ``forked_from``: continuations, forks), the rule that says
whether a chain may go (``blocker``), and deleting a chain's rows from every
table in one transaction that checks the rule again (``remove_chain``), so a
run that changed or gained a child meanwhile is never deleted. Bundles are
the caller's (``supervisor.maint.gc``). Does not import sqlite3.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..limits import validate_run_id
from ..record import record
from ..states import TERMINAL, QueueState
from .backend import Tx
from .base import StoreBase
from .catchup import _WAITING

# Every table that holds rows of a run, children first; the queue row goes last.
_RUN_TABLES = ("run_events", "workflow_notifications", "workflow_turn_intents", "effects",
               "workflow_run_queue")
_MEMBER_SQL = ("SELECT run_id, workflow, state, parent_run_id, forked_from, cancel_requested,"
               " coalesce(finished_at, updated_at) AS settled_at FROM workflow_run_queue")
# A session has not been told yet: a notification not delivered, a follow-up not resolved.
_OWED_SQL = ("SELECT run_id, session_id FROM workflow_notifications WHERE delivered_at IS NULL"
             " UNION SELECT run_id, session_id FROM workflow_turn_intents"
             " WHERE state = 'pending'")


@record(frozen=True)
class ChainMember:
    run_id: str
    workflow: str
    state: QueueState
    parent_run_id: str | None
    settled_at: int  # finished_at, else updated_at (epoch ms)
    waiting: bool  # done in the queue, waiting at a checkpoint, no live continuation
    owed_to: str | None  # a session still owed a notification or follow-up of this run
    forked_from: str | None = None  # a fork is linked to its original as a child is
    cancel_requested: bool = False  # on a done row: its wait was closed by `cancel`
    held_by: str | None = None  # a child run of this controller resource (``controller/key``)


@record(frozen=True)
class Hold:
    """Why a chain stays: a stable ``code`` and a line for a person."""

    code: str  # open | waiting | undelivered | controller | recent | changed | gone
    detail: str


@record(frozen=True)
class Chain:
    """Runs linked by parent/child edges, oldest first; removed together or not at all."""

    members: tuple[ChainMember, ...]

    @property
    def run_ids(self) -> list[str]:
        return [m.run_id for m in self.members]


def blocker(chain: Chain, cutoff: int) -> Hold | None:
    """Why ``chain`` must stay, or None if it may be removed.

    Every member must be terminal, none may wait at a checkpoint, each must
    have settled before ``cutoff``, and no session may still be owed a
    message of any of them.
    """
    for m in chain.members:
        if m.state not in TERMINAL:
            return Hold("open", f"its chain is open: {m.run_id} is {m.state}")
        if m.waiting:
            return Hold("waiting", f"{m.run_id} waits at a checkpoint for an answer")
    for m in chain.members:
        if m.owed_to is not None:
            return Hold("undelivered", f"session {m.owed_to} has not received all messages of"
                        f" {m.run_id} (`pi-workflows sync --session {m.owed_to}` delivers them)")
    for m in chain.members:
        if m.held_by is not None:
            return Hold("controller", f"{m.run_id} is a child run of resource {m.held_by};"
                        " it goes once that resource is deleted")
    for m in chain.members:
        if m.settled_at >= cutoff:
            return Hold("recent", f"its chain has a run newer than the cutoff ({m.run_id})")
    return None


def _members(tx: Tx, ids: tuple[str, ...] | None = None) -> list[ChainMember]:
    """The chain facts of ``ids`` (every run when None), read in the caller's transaction."""
    only = "" if ids is None else f" AND q.run_id IN ({', '.join('?' * len(ids))})"
    params = () if ids is None else ids
    rows = tx.all(f"{_MEMBER_SQL} q WHERE 1 = 1{only} ORDER BY created_at, run_id", params)
    waiting = {r["run_id"] for r in tx.all(
        f"SELECT q.run_id FROM workflow_run_queue q WHERE {_WAITING}{only}", params)}
    owed: dict[str, str] = {}
    for r in tx.all(f"SELECT q.* FROM ({_OWED_SQL}) q WHERE 1 = 1{only}", params):
        owed.setdefault(r["run_id"], r["session_id"])
    # A child run of a resource stays while the resource does: its record names it.
    held = {r["run_id"]: f"{r['controller']}/{r['key']}" for r in tx.all(
        "SELECT q.run_id, c.controller, c.key FROM controller_children AS c"
        " JOIN workflow_run_queue AS q ON q.run_id = c.run_id"
        f" WHERE 1 = 1{only}", params)}
    return [ChainMember(r["run_id"], r["workflow"], QueueState(r["state"]), r["parent_run_id"],
                        int(r["settled_at"]), r["run_id"] in waiting, owed.get(r["run_id"]),
                        r["forked_from"], bool(r["cancel_requested"]), held.get(r["run_id"]))
            for r in rows]


def _group(members: Iterable[ChainMember]) -> list[Chain]:
    """Connected components over parent links (a parent that is gone links nothing)."""
    ordered = list(members)
    root: dict[str, str] = {m.run_id: m.run_id for m in ordered}

    def find(x: str) -> str:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    for m in ordered:
        for link in (m.parent_run_id, m.forked_from):
            if link is not None and link in root:
                root[find(m.run_id)] = find(link)
    groups: dict[str, list[ChainMember]] = {}
    for m in ordered:
        groups.setdefault(find(m.run_id), []).append(m)
    return [Chain(tuple(g)) for g in groups.values()]


def _component(tx: Tx, run_id: str) -> set[str]:
    """The ids linked to ``run_id`` through parent and fork edges, as the store says now."""
    seen, todo = set(), [run_id]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for r in tx.all("SELECT run_id FROM workflow_run_queue WHERE parent_run_id = ?"
                        " OR forked_from = ?"
                        " UNION SELECT parent_run_id FROM workflow_run_queue WHERE run_id = ?"
                        " AND parent_run_id IS NOT NULL"
                        " UNION SELECT forked_from FROM workflow_run_queue WHERE run_id = ?"
                        " AND forked_from IS NOT NULL", (current, current, current, current)):
            todo.append(r["run_id"])
    return seen


class RetentionOps(StoreBase):
    def chains(self) -> list[Chain]:
        """Every chain of the project, in one read transaction; oldest first."""
        with self._db.transaction(write=False) as tx:
            return _group(_members(tx))

    def remove_chain(self, run_ids: list[str], cutoff: int) -> Hold | None:
        """Delete the chain of ``run_ids`` from every table; None if done, else why not.

        Refused (nothing changes) unless the chain, read again inside this
        write transaction, is exactly ``run_ids`` and ``blocker`` finds
        nothing: a run that gained a continuation or a fork, was answered,
        or got a new message since the caller looked stays.
        """
        for run_id in run_ids:
            validate_run_id(run_id)
        with self._db.transaction() as tx:
            linked = _component(tx, run_ids[0])
            ids = tuple(sorted(linked))
            members = _members(tx, ids)
            present = {m.run_id for m in members}
            if not present:
                return Hold("gone", "already removed")
            if present != set(run_ids):
                return Hold("changed", "its chain changed meanwhile (a run was added or removed)")
            reason = blocker(Chain(tuple(members)), cutoff)
            if reason is not None:
                return reason
            marks = ", ".join("?" * len(ids))
            for table in _RUN_TABLES:
                tx.execute(f"DELETE FROM {table} WHERE run_id IN ({marks})", ids)
        return None
