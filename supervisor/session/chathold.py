"""``chat RUN``'s hold on a parked run: nobody resumes it while a person talks to its Pi.

Owns taking the hold, keeping it and giving it back, with the public claim
API only, so the store's own lease rules decide everything: the chat process
registers as a runner (kind ``session``, id ``chat-...``: see
``views.holds``), claims the parked run by id (one compare-and-set: it fails
if a host got there first), renews the lease while Pi runs, and parks the
run again when Pi exits, with the error code it had (a blocked run stays
blocked). A chat process that dies (``kill -9``) stops renewing: a host takes
the claim over, at once when it can prove the chat process dead, else at
lease expiry, and resumes the run. A run that is not parked (done, failed,
waiting) needs no hold: no runner resumes it. Imports ``protocol`` and
``views.holds``; never ``host`` or ``cli``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from collections.abc import Callable, Iterator

from ...protocol.errors import (
    ClaimLost,
    ConflictError,
    PiWorkflowsError,
    TransitionRefused,
    UsageError,
)
from ...protocol.liveness import host_name, process_start_time
from ...protocol.states import QueueState
from ...protocol.store import Claim, QueueRow, Store
from ..views.holds import CHAT_PREFIX, chat_hold, hold_text


def _refusal(store: Store, run_id: str, why: str) -> UsageError:
    row = store.get(run_id)
    hold = chat_hold(store, row) if row is not None else None
    if hold is not None:
        why = f"it is {hold_text(hold)}"
    return UsageError(f"run {run_id} cannot be opened in chat now: {why}; its conversation has"
                      " one writer", code="run_active")


@contextlib.contextmanager
def held_for_chat(store: Store, row: QueueRow, renew_s: float,
                  on_lost: Callable[[], None],
                  opener: Callable[[], Store]) -> Iterator[Claim | None]:
    """Hold ``row``'s run while the block runs (None: not parked, nothing to hold).

    ``on_lost`` is called (from the renewing thread, which renews through its
    own store from ``opener``) if the hold is lost anyway: a lease that ran
    out while this process was frozen, say.
    """
    if row.state != QueueState.PARKED:
        yield None
        return
    runner_id = f"{CHAT_PREFIX}{host_name()}-{os.getpid()}-{secrets.token_hex(3)}"
    store.register_runner(runner_id, "session", os.getpid(), process_start_time(), host_name())
    try:
        try:
            claim = store.claim_by_id(row.run_id, runner_id, paused_ok=True)
        except (TransitionRefused, ConflictError) as exc:
            raise _refusal(store, row.run_id, str(exc)) from None
        stop = threading.Event()
        keeper = threading.Thread(target=_keep, args=(opener, claim, runner_id, renew_s, stop,
                                                      on_lost),
                                  daemon=True, name="pi-workflows-chat-hold")
        keeper.start()
        try:
            yield claim
        finally:
            stop.set()
            keeper.join()
            _give_back(store, claim, row)
    finally:
        with contextlib.suppress(PiWorkflowsError):
            store.unregister_runner(runner_id)


def _keep(opener: Callable[[], Store], claim: Claim, runner_id: str, renew_s: float,
          stop: threading.Event, on_lost: Callable[[], None]) -> None:
    with opener() as store:
        while not stop.wait(renew_s):
            try:
                store.renew(claim.run_id, claim.token)
                store.heartbeat(runner_id)
            except ClaimLost:
                on_lost()
                return
            except PiWorkflowsError:
                continue  # a busy store: the next renewal tries again, well within the lease


def _give_back(store: Store, claim: Claim, before: QueueRow) -> None:
    """``starting -> running -> parked`` (the only way back to parked), as it was."""
    try:
        store.mark_running(claim.run_id, claim.token)
        store.park(claim.run_id, claim.token, code=before.error_code,
                   message=before.error_message)
    except PiWorkflowsError:
        pass  # lost meanwhile: whoever took it over owns the run now
