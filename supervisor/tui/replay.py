"""Replay: where in a run's trace history the viewer stands, and what the run looked like there.

Owns ``Replay``, a cursor over a run document's trace (``None``: following
live), moved one event back or forward; reaching the end follows live
again. What the graph shows at a point is ``views.stream.states_at`` (the
node states folded from the first events); the steps shown are those
started by then, an unfinished one as running. Imports ``views.stream``
and ``protocol.states``; never textual (the plain path and the tests use
it without a screen).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...protocol.states import RunStatus
from ..views.stream import states_at


@dataclass
class Replay:
    """``pos`` is how many trace events are shown; ``None`` means all of them, live."""

    pos: int | None = None

    @property
    def live(self) -> bool:
        return self.pos is None

    def back(self, doc: dict[str, Any]) -> None:
        total = len(doc.get("trace") or [])
        current = total if self.pos is None else self.pos
        self.pos = max(1 if total else 0, current - 1)

    def forward(self, doc: dict[str, Any]) -> None:
        if self.pos is None:
            return
        total = len(doc.get("trace") or [])
        self.pos += 1
        if self.pos >= total:
            self.pos = None  # at the end: follow live again

    def follow(self) -> None:
        self.pos = None

    def states(self, doc: dict[str, Any]) -> dict[str, str]:
        if self.pos is None:
            return dict(doc.get("nodes") or {})
        return dict(states_at(doc, self.pos))

    def steps(self, doc: dict[str, Any]) -> list[dict[str, Any]]:
        steps: list[dict[str, Any]] = list(doc.get("steps") or [])
        if self.pos is None:
            return steps
        shown = (doc.get("trace") or [])[:self.pos]
        started = {e.get("attemptId") for e in shown if e.get("attemptId") is not None}
        at = shown[-1].get("at") if shown else None
        out = []
        for step in steps:
            if step.get("attemptId") not in started:
                continue
            ended = step.get("endedAt")
            if ended is not None and at is not None and ended > at:
                step = {**step, "outcome": str(RunStatus.RUNNING), "endedAt": None,
                        "durationMs": None}
            out.append(step)
        return out

    def label(self, doc: dict[str, Any]) -> str:
        total = len(doc.get("trace") or [])
        if self.pos is None:
            return f"live · {total} events"
        event = (doc.get("trace") or [])[self.pos - 1] if self.pos else {}
        what = event.get("type", "")
        node = event.get("nodeId")
        return f"replay {self.pos}/{total} · {what}" + (f" {node}" if node else "")
