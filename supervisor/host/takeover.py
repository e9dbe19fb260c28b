"""Which runners are provably dead on this machine, so their runs can be taken over.

Owns telling live runners from dead ones: a runner row whose pid and
process start time no longer name a live process on this host is dead, and
the host takes its claims at once, without waiting for their leases (the
store's ``take_over_runner``, a compare-and-set per claim), at start-up and
on every sweep. Imports ``protocol`` only.
"""

from __future__ import annotations

from ...protocol.liveness import runner_is_dead
from ...protocol.store import RunnerRow, Store


def runners(store: Store, own_id: str) -> tuple[set[str], list[RunnerRow]]:
    """(ids of live runners, ours included; rows of runners provably dead on this machine)."""
    live, dead = {own_id}, []
    for row in store.list_runners():
        if row.runner_id == own_id:
            continue
        if runner_is_dead(row.pid, row.pid_start_time, row.host_name):
            dead.append(row)
        else:
            live.add(row.runner_id)
    return live, dead
