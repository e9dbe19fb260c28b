"""Whether a claim's holder is gone, so a runner may take the claim at once.

Owns the proof a runner hands the store (``Gone``) to take one claim
without watching it for a lease: the holder has no ``runners`` row (every
live runner keeps one while it holds claims), or its row names a process
proven dead on this machine (``protocol.liveness``). The holder's leftover
processes for the run (its worker, a shell command) may outlive it, so
they are killed before the claim is taken. Nothing here reads a wall
clock. Imports ``protocol`` and the procs wing's OS layer only.
"""

from __future__ import annotations

from ...protocol.liveness import runner_is_dead
from ...protocol.store import Gone, Store
from .oslayer import OsLayer


def holder_gone(store: Store, runner_id: str) -> Gone | None:
    """Proof that ``runner_id`` is gone, or None while it may be alive."""
    row = next((r for r in store.list_runners() if r.runner_id == runner_id), None)
    if row is None:
        return Gone(runner_id)
    if runner_is_dead(row.pid, row.pid_start_time, row.host_name):
        return Gone(runner_id, row.pid, row.pid_start_time)
    return None


def clear_gone_holder(store: Store, os_layer: OsLayer, project_key: str, run_id: str,
                      runner_id: str) -> Gone | None:
    """``holder_gone``, with the holder's leftover processes of ``run_id`` killed first."""
    gone = holder_gone(store, runner_id)
    if gone is not None:
        os_layer.kill(os_layer.run_processes(project_key, runner_id, run_id))
    return gone
