"""``pi-workflows delete RUN``: gc's removal for the one run a person names.

Owns finding the run's chain, refusing what gc would keep (a run that has
not ended, one waiting at a checkpoint, undelivered messages, a run a live
process uses, a bundle that is not safe to delete), in words for someone
who asked for this run, and removing it through gc's own path
(``supervisor.maint.gc``: the gc lock, finishing an interrupted gc, the
journal, the rows in one transaction that checks the rules again, the
bundle moved whole into the trash). Age is no rule here: naming the run is
the decision. Imports ``protocol``, ``supervisor.maint.gc`` (and its
``gc_bundles``) and ``supervisor.views.runref``; never ``session``,
``host`` or ``cli``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...protocol.errors import ConflictError
from ...protocol.paths import Paths
from ...protocol.record import record
from ...protocol.states import TERMINAL
from ...protocol.store import Chain, Hold, Store
from ..views.runref import existing_row
from .gc import RunLine, consider, finish, in_use_now, pause_at, remove_planned
from .gc_bundles import gc_lock

# No settled run is "too recent" for delete: a cutoff past every settling time.
_ANY_AGE = (1 << 63) - 1

_WHAT_NEXT = {
    "open": "only a run that has ended (completed, failed, timed out or cancelled) can be"
            " deleted: wait for it, or `pi-workflows cancel` it first",
    "waiting": "answer it or `pi-workflows cancel` it first",
    "in_use": "stop what uses it (a `chat`, a worker) and try again",
}


@record(frozen=True)
class Deleted:
    """What ``delete`` removed, and what an interrupted gc left that it finished."""

    removed: tuple[RunLine, ...]
    finished: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {"deleted": [line.as_json() for line in self.removed],
                "finished": list(self.finished),
                "summary": {"runs": len(self.removed),
                            "bytes": sum(line.bytes for line in self.removed)}}


def _refusal(run_id: str, hold: Hold) -> ConflictError:
    after = _WHAT_NEXT.get(hold.code)
    return ConflictError(f"run {run_id} was not deleted: {hold.detail}"
                         + (f"; {after}" if after else ""), code=f"delete_{hold.code}")


def _chain_of(store: Store, run_id: str) -> Chain:
    for chain in store.chains():
        if run_id in chain.run_ids:
            return chain
    raise ConflictError(f"run {run_id} was not deleted: it is gone already", code="delete_gone")


def _not_ended(run_id: str, chain: Chain) -> ConflictError | None:
    open_ = [m for m in chain.members if m.state not in TERMINAL]
    if not open_:
        return None
    first = open_[0]
    what = (f"it is {first.state}" if first.run_id == run_id
            else f"a run linked to it ({first.run_id}) is {first.state}")
    return ConflictError(f"run {run_id} was not deleted: {what}; {_WHAT_NEXT['open']}",
                         code="delete_open")


def delete_run(store: Store, paths: Paths, text: str, *, now: int, whole_chain: bool = False,
               pause: Callable[[str], None] = pause_at) -> Deleted:
    """Remove the run ``text`` names (with ``whole_chain``, every run linked to it).

    A run linked to others (a continuation, a fork) goes only with its whole
    chain, as in gc; without ``whole_chain`` that is refused, naming the chain.
    """
    run_id = existing_row(store, text, paths).run_id
    runs_dir = paths.runs_dir
    with gc_lock(runs_dir):
        finished = finish(store, runs_dir)
        chain = _chain_of(store, run_id)
        if len(chain.members) > 1 and not whole_chain:
            others = [i for i in chain.run_ids if i != run_id]
            shown = ", ".join(others[:3]) + (" and more" if len(others) > 3 else "")
            raise ConflictError(f"run {run_id} was not deleted: it is linked to {len(others)}"
                                f" other run(s) (continuations or forks: {shown}), which go"
                                " together or not at all; `pi-workflows delete"
                                f" {run_id} --chain` deletes all {len(chain.members)}",
                                code="delete_chain")
        refused = _not_ended(run_id, chain)
        if refused is not None:
            raise refused
        cand, hold, _ = consider(paths, chain, _ANY_AGE, now, in_use_now(paths))
        if cand is None:
            raise _refusal(run_id, hold or Hold("changed", "its chain changed meanwhile"))
        removed, kept, _ = remove_planned(store, runs_dir, [cand], _ANY_AGE, now, pause)
    if kept:
        raise _refusal(run_id, Hold(str(kept[0].reason), str(kept[0].detail)))
    if not removed:
        raise ConflictError(f"run {run_id} was not deleted: it is gone already",
                            code="delete_gone")
    return Deleted(tuple(removed), tuple(finished))
