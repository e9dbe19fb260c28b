"""Who holds a run that is not executing: ``chat RUN``'s hold, as ``status``, ``resume``
and the host's log word it.

Owns recognising a hold (a claim on the run by a runner whose id starts with
``chat-``; see ``supervisor.session.chathold``) and describing it: the
holder's pid and since when. Reads the store only. Imports ``protocol``
only; never another wing.
"""

from __future__ import annotations

import time
from typing import Any

from ...protocol.states import CLAIMED
from ...protocol.store import QueueRow, Store

CHAT_PREFIX = "chat-"


def is_chat_runner(runner_id: str | None) -> bool:
    return bool(runner_id) and str(runner_id).startswith(CHAT_PREFIX)


def chat_hold(store: Store, row: QueueRow) -> dict[str, Any] | None:
    """``{"kind": "chat", "pid", "since"}`` while ``chat`` holds the run, else None."""
    if row.state not in CLAIMED or not is_chat_runner(row.runner_id):
        return None
    pid = next((r.pid for r in store.list_runners() if r.runner_id == row.runner_id), None)
    # The claim's CAS stamped updated_at; nothing else touches a held row but renewals.
    return {"kind": "chat", "pid": pid, "since": row.updated_at}


def hold_text(hold: dict[str, Any]) -> str:
    """``held by chat (pid N) since 12:04:31``: why the run is not resumed."""
    since = time.strftime("%H:%M:%S", time.localtime(hold["since"] / 1000))
    pid = hold.get("pid")
    return f"held by chat ({'pid ' + str(pid) if pid else 'pid unknown'}) since {since}"
