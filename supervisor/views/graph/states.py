"""Each node's state in one run, for the graph pictures: a pure reading of its bundle.

Owns ``node_states(raw_state, events)``: the results the projection holds
(a continuation's earlier nodes included), then the trace in order
(``node_started`` running, ``node_finished`` done, ``node_failed`` failed,
``run_waiting`` waiting, an include's entry and exit done), then the
projection's word on where the run stands now (its ``currentNode`` and
``currentAttempt``, its ``waitingNode``, its status). A node still running
in a run that ended failed or was cancelled reads ``failed`` or
``cancelled``; with ``nodes``, every node the run never reached reads
``pending``, or ``skipped`` once the run has ended. Imports
``protocol.states``; never another wing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ....protocol.states import TERMINAL_STATUSES, Outcome, RunStatus

PENDING, RUNNING, DONE, FAILED, WAITING, SKIPPED = (
    "pending", "running", "done", "failed", "waiting", "skipped")
CANCELLED = "cancelled"
_BY_EVENT = {"node_started": RUNNING, "node_finished": DONE, "node_failed": FAILED,
             "run_waiting": WAITING, "include_entered": DONE, "include_exited": DONE}


def node_states(raw_state: Mapping[str, Any], events: Iterable[Mapping[str, Any]], *,
                nodes: Iterable[str] = ()) -> dict[str, str]:
    """Node id -> ``pending | running | done | failed | waiting | skipped | cancelled``."""
    found: dict[str, str] = {}
    results = raw_state.get("results")
    for node_id, result in (results.items() if isinstance(results, Mapping) else ()):
        if isinstance(result, Mapping):
            found[str(node_id)] = DONE if result.get("outcome") == Outcome.OK else FAILED
    open_nodes: set[str] = set()  # started and not yet finished
    for event in events:
        node_id = event.get("nodeId")
        word = _BY_EVENT.get(str(event.get("type")))
        if not isinstance(node_id, str) or word is None:
            continue
        found[node_id] = word
        if word is RUNNING:
            open_nodes.add(node_id)
        else:
            open_nodes.discard(node_id)
    status = raw_state.get("status")
    current, attempt = raw_state.get("currentNode"), raw_state.get("currentAttempt")
    waiting = raw_state.get("waitingNode")
    if status == RunStatus.WAITING and isinstance(waiting, str):
        found[waiting] = WAITING
        open_nodes.discard(waiting)
    elif status == RunStatus.RUNNING and isinstance(current, str) and attempt is not None:
        found[current] = RUNNING
        open_nodes.add(current)
    if status in TERMINAL_STATUSES:
        ended = CANCELLED if status == RunStatus.CANCELLED else FAILED
        for node_id in open_nodes:
            found[node_id] = ended
        if status in (RunStatus.FAILED, RunStatus.TIMED_OUT) and isinstance(current, str) \
                and current not in found:
            found[current] = FAILED
    rest = SKIPPED if status in TERMINAL_STATUSES else PENDING
    for node_id in nodes:
        found.setdefault(node_id, rest)
    return found
