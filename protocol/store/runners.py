"""The ``runners`` table and the takeover of a dead runner's claims.

Owns runner registration and heartbeats, and moving claims from a runner
proven dead to a live one (one CAS per run). Proof of death is the caller's
(``protocol.liveness``); this module only records and moves. No sqlite3.
"""

from __future__ import annotations

from ..errors import NotFound
from ..limits import validate_key
from ..states import CLAIMED, QueueState, check_transfer, sql_list
from .base import StoreBase, new_token
from .records import Claim, RunnerRow

RUNNER_KINDS = ("host", "session")


class RunnerOps(StoreBase):
    def register_runner(self, runner_id: str, kind: str, pid: int, pid_start_time: float,
                        host_name: str) -> RunnerRow:
        validate_key(runner_id, "runner id")
        if kind not in RUNNER_KINDS:
            raise ValueError(f"runner kind must be one of {RUNNER_KINDS}")
        now = self._now()
        with self._db.transaction() as tx:
            tx.execute(
                "INSERT INTO runners(runner_id, kind, pid, pid_start_time, host_name, started_at,"
                " heartbeat_at) VALUES (?,?,?,?,?,?,?) ON CONFLICT(runner_id) DO UPDATE SET"
                " kind = excluded.kind, pid = excluded.pid,"
                " pid_start_time = excluded.pid_start_time, host_name = excluded.host_name,"
                " heartbeat_at = excluded.heartbeat_at",
                (runner_id, kind, pid, pid_start_time, host_name, now, now))
            row = tx.one("SELECT * FROM runners WHERE runner_id = ?", (runner_id,))
        assert row is not None
        return RunnerRow(**row)

    def heartbeat(self, runner_id: str) -> None:
        with self._db.transaction() as tx:
            if tx.execute("UPDATE runners SET heartbeat_at = ? WHERE runner_id = ?",
                          (self._now(), runner_id)) != 1:
                raise NotFound(f"runner {runner_id} is not registered")

    def unregister_runner(self, runner_id: str) -> None:
        with self._db.transaction() as tx:
            tx.execute("DELETE FROM runners WHERE runner_id = ?", (runner_id,))

    def list_runners(self) -> list[RunnerRow]:
        with self._db.transaction(write=False) as tx:
            rows = tx.all("SELECT * FROM runners ORDER BY started_at, runner_id")
        return [RunnerRow(**r) for r in rows]

    def take_over_runner(self, dead: RunnerRow, new_runner_id: str, *,
                         as_host: bool = True) -> list[Claim]:
        """Move every claim of ``dead`` to ``new_runner_id`` at once, without lease expiry.

        Call only with proof that ``dead`` is gone (same machine; pid missing
        or its start time differs). If the runner id has meanwhile been
        registered by another process, nothing moves (its claims may be that
        live process's). A host does not take origin-bound ``starting`` rows:
        those wait for their session.
        """
        validate_key(new_runner_id, "runner id")
        now = self._now()
        claims: list[Claim] = []
        with self._db.transaction() as tx:
            current = tx.one("SELECT pid, pid_start_time FROM runners WHERE runner_id = ?",
                             (dead.runner_id,))
            if current is not None and (current["pid"], current["pid_start_time"]) != (
                    dead.pid, dead.pid_start_time):
                # The id was registered again by another process: the claims under
                # it may be that live incarnation's, so only lease expiry frees them.
                return []
            tx.execute("DELETE FROM runners WHERE runner_id = ? AND pid = ? AND pid_start_time = ?",
                       (dead.runner_id, dead.pid, dead.pid_start_time))
            rows = tx.all(
                "SELECT run_id, state, claim_token FROM workflow_run_queue WHERE runner_id = ?"
                f" AND state IN {sql_list(CLAIMED)}"
                + (f" AND NOT (state = '{QueueState.STARTING}' AND origin_session IS NOT NULL)"
                   if as_host else "") + " ORDER BY created_at, run_id", (dead.runner_id,))
            for row in rows:
                check_transfer(row["run_id"], row["state"])
                token = new_token()
                lease = now + self.lease_ms
                changed = tx.execute(
                    "UPDATE workflow_run_queue SET runner_id = ?, claim_token = ?,"
                    " lease_expires_at = ?, updated_at = ? WHERE run_id = ? AND state = ?"
                    " AND claim_token = ? AND runner_id = ?",
                    (new_runner_id, token, lease, now, row["run_id"], row["state"],
                     row["claim_token"], dead.runner_id))
                if changed != 1:
                    continue
                self._event(tx, row["run_id"], "claim_taken_over", now, {
                    "runnerId": new_runner_id, "from": row["state"],
                    "previousRunner": dead.runner_id, "reason": "runner_dead"})
                state = QueueState(row["state"])
                claims.append(Claim(row["run_id"], new_runner_id, token, lease, state, state))
        return claims
