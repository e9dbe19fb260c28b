"""``on_timeout``: the host answers a human decision nobody answered in time.

Owns ``Deadlines``, one small step of the host's pass. A waiting human
decision with ``on_timeout`` records its deadline (``dueAt``, ms on the wall
clock) in its bundle's waiting output, before the run is ``waiting`` in the
queue. The host keeps an index of those deadlines in memory, a heap, so a
pass costs one look at its earliest entry plus one read of the store's feed
past the last event it saw: filled at start-up from the store's waiting runs
(one bundle read each, once), then from the feed's ``done`` events that end
a run waiting (a session's runs too).

When a deadline has passed, and the run still waits (its queue row done and
not cancelled, no live continuation, its bundle waiting at the same request),
the host queues the continuation the answer would: the answer is
``{"choice": LABEL, "by": "timeout"}`` (``decide``), the source is the one the
parent pinned (the worker refuses it if the file changed since), and the run
id is derived from the parent's, so the timeout's answer is queued at most
once ever: a host killed after the insert finds the row (or the live
continuation) on restart and stops there; one killed before it finds the run
still waiting and answers it then. Nothing is written before that insert.
Imports ``protocol`` only.
"""

from __future__ import annotations

import hashlib
import heapq
import time
from collections.abc import Callable
from typing import Any

from loguru import logger

from ...protocol.bundle import Bundle, BundleCorrupt
from ...protocol.definitions.requests import decide, request_in
from ...protocol.errors import ConflictError, PiWorkflowsError
from ...protocol.runid import slugify
from ...protocol.states import QueueState, RunStatus
from ...protocol.store import QueueRow, RunSource, Store

FEED_BATCH = 500  # feed events read per pass; the rest come in the next ones
TIMEOUT_EVENT = "done"  # the queue's event for a run that ended completed or waiting


def timeout_run_id(parent: QueueRow, due_ms: int) -> str:
    """The continuation id of a timeout's answer: the same for every host that tries."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(due_ms / 1000))
    tag = hashlib.sha256(f"on_timeout:{parent.run_id}".encode()).hexdigest()[:8]
    return f"{stamp}-{slugify(parent.workflow)}-{tag}"


class Deadlines:
    """The index of waiting decisions' deadlines, and firing them."""

    def __init__(self, store: Store, runs_dir: Any, *,
                 wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.store = store
        self.runs_dir = runs_dir
        self.wall_ms = wall_ms
        self._heap: list[tuple[int, str]] = []
        self._seq = 0

    def start(self) -> None:
        """Index every waiting run's deadline (the feed's head first: nothing slips between)."""
        self._seq = self.store.last_event_seq()
        for row in self.store.waiting_runs():
            self._index(row.run_id)

    def step(self) -> list[str]:
        """One pass: learn new waiting runs from the feed, answer the due; the runs answered."""
        events = self.store.events_since(self._seq, limit=FEED_BATCH)
        for event in events:
            self._seq = max(self._seq, event.seq)
            payload = event.payload if isinstance(event.payload, dict) else {}
            if event.type == TIMEOUT_EVENT and payload.get("runStatus") == RunStatus.WAITING:
                self._index(event.run_id)
        answered = []
        now = self.wall_ms()
        while self._heap and self._heap[0][0] <= now:
            _, run_id = heapq.heappop(self._heap)
            if self._answer(run_id):
                answered.append(run_id)
        return answered

    def next_due_s(self) -> float | None:
        """Seconds until the earliest deadline (for the host's wait), or None."""
        if not self._heap:
            return None
        return max(0.0, (self._heap[0][0] - self.wall_ms()) / 1000)

    def _request(self, run_id: str) -> dict[str, Any] | None:
        try:
            state = Bundle(self.runs_dir, run_id).state()
        except (BundleCorrupt, OSError, ValueError):
            return None
        if state.get("status") != RunStatus.WAITING:
            return None
        request = request_in(state.get("waitingOutput"))
        if request is None or not request.get("onTimeout") \
                or not isinstance(request.get("dueAt"), int):
            return None
        return request

    def _index(self, run_id: str) -> None:
        request = self._request(run_id)
        if request is not None:
            heapq.heappush(self._heap, (int(request["dueAt"]), run_id))

    def _answer(self, run_id: str) -> bool:
        row = self.store.get(run_id)
        if row is None or row.state != QueueState.DONE or row.cancel_requested:
            return False  # cancelled while it waited, or deleted
        if self.store.continuation_of(run_id) is not None:
            return False  # a person answered first
        request = self._request(run_id)
        if request is None:
            return False
        try:
            answer = decide(request, {"choice": request["onTimeout"]}, run_id, by="timeout")
        except PiWorkflowsError:
            return False  # not a choice of what was asked (validate refuses such a file)
        child = timeout_run_id(row, int(request["dueAt"]))
        source = RunSource(row.workflow, row.source_path, row.source_sha256,
                           row.definition_digest)
        try:
            self.store.enqueue_detached(child, source, answer, parent_run_id=run_id,
                                        notify_session=row.notify_session or row.origin_session,
                                        agent_dir=self.store.launch_agent_dir(run_id))
        except ConflictError as exc:
            # A person's answer won the race, or this very answer was queued before
            # a crash (``run_exists``): either way it is not queued again.
            logger.info("run {}: not answered by timeout ({})", run_id, exc.code)
            return False
        logger.info("run {}: answered by timeout with {!r}; continuation {}", run_id,
                    answer["choice"], child)
        return True
