"""The run document: one run as a viewer's detail screen shows it, kept up by tailing.

Owns ``RunDetail``: it tails the run's trace, shell output and agent
capture (each read once, from where it stopped: the file is never read
whole again), and builds the document of ``docs/view-stream.md`` from what
it holds plus the queue row and projection; ``states_at`` folds the node
states of a prefix of the trace (replay), and ``watched_paths`` names the
files whose change can change the document. A torn last line waits until
it is complete; a trace rewritten shorter (a repair) is read again and
what was seen is skipped; a bundle removed while shown reads as
``"bundle": "missing"``. Large strings stay the bundle's artifact
references. Never writes. Imports ``protocol`` and ``supervisor.views``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ....protocol.bundle import Bundle, BundleCorrupt
from ....protocol.clock import now_ms
from ....protocol.errors import NotFound
from ....protocol.pibin import SESSION_FILE
from ....protocol.store import Store
from ..follower import JsonTail
from ..graph.states import node_states
from ..status import chain, run_status, shown_state
from ..steplogs import fold_steps
from .runs import summary
from .transcript import transcript_entry

MAX_RECORDS = 20_000  # of shell output, agent capture and transcript each: past it, cut


class RunDetail:
    """One run's document, rebuilt from the tails on each ``doc()``."""

    def __init__(self, store: Store | None, runs_dir: Path, run_id: str) -> None:
        self.store, self.runs_dir, self.run_id = store, runs_dir, run_id
        self.bundle = Bundle(runs_dir, run_id)
        if (store is None or store.get(run_id) is None) and not self.bundle.exists():
            raise NotFound(f"no run {run_id} in this project", code="run_not_found")
        self._trace_tail = JsonTail(self.bundle.trace_path)
        self._output_tail = JsonTail(self.bundle.output_path)
        self._capture_tail = JsonTail(self.bundle.session_dir / "events.ndjson")
        self._session_tail = JsonTail(self.bundle.session_dir / SESSION_FILE)
        self.trace: list[dict[str, Any]] = []
        self.output: list[dict[str, Any]] = []
        self.conversation: list[dict[str, Any]] = []
        self.transcript: list[dict[str, Any]] = []
        self.cut = {"output": False, "conversation": False, "transcript": False}
        self._seq = 0
        self._graph: dict[str, Any] | None = None

    def _take(self) -> None:
        events = self._trace_tail.records()
        if self._trace_tail.restarted:
            # Rewritten by a repair: lines shown before may be gone and their seqs
            # written again, so what the file holds now is the whole trace.
            self._trace_tail.restarted = False
            self.trace, self._seq = [], 0
        for event in events:
            seq = event.get("seq")
            if isinstance(seq, int):
                if seq <= self._seq:
                    continue  # out of order: never shown twice
                self._seq = seq
            self.trace.append(event)
        for name, tail, into in (("output", self._output_tail, self.output),
                                 ("conversation", self._capture_tail, self.conversation)):
            records = tail.records()
            if tail.restarted:
                tail.restarted = False
                into.clear()
                self.cut[name] = False
            for record in records:
                if len(into) >= MAX_RECORDS:
                    self.cut[name] = True
                    break
                into.append(record)
        records = self._session_tail.records()
        if self._session_tail.restarted:
            self._session_tail.restarted = False
            self.transcript.clear()
            self.cut["transcript"] = False
        for record in records:
            entry = transcript_entry(record)
            if entry is None:
                continue
            if len(self.transcript) >= MAX_RECORDS:
                self.cut["transcript"] = True
                break
            self.transcript.append(entry)

    def watched_paths(self) -> list[Path]:
        b = self.bundle
        return [b.dir, b.trace_path, b.state_path, b.state_log_path, b.output_path,
                b.session_dir / "events.ndjson", b.session_dir / SESSION_FILE, b.manifest_path]

    def doc(self, now: int | None = None) -> dict[str, Any]:
        at = now_ms() if now is None else now
        row = self.store.get(self.run_id) if self.store is not None else None
        present = self.bundle.exists()
        if present:
            self._take()
        bundle_word: str = "missing"
        state: Mapping[str, Any] = {}
        if present:
            try:
                state = self.bundle.raw_state()
                if self._graph is None:
                    self._graph = self.bundle.snapshot()
                bundle_word = "ok"
            except (BundleCorrupt, ValueError, OSError) as exc:
                bundle_word = f"unreadable: {str(exc)[:200]}"
        run: dict[str, Any] = {"runId": self.run_id}
        members: list[dict[str, Any]] = []
        if row is not None:
            info = run_status(row, self.runs_dir, (self.store.forks_of([self.run_id])
                                                   if self.store else {}).get(self.run_id))
            if self.store is not None:
                info["continuedBy"] = self.store.continuations().get(self.run_id)
                members = [{"runId": m.run_id, "state": m.state}
                           for m in chain(self.store, row)]
            run = {**summary(info, 0, self.runs_dir, at),
                   "summary": info.get("summary"), "request": info.get("request"),
                   "answeredBy": info.get("answeredBy"), "error": info.get("error"),
                   "finalOutput": info.get("finalOutput"),
                   "bundleError": info.get("bundleError")}
            run["state"] = shown_state(info)
        nodes = node_states(state, self.trace, nodes=_node_ids(self._graph)) \
            if bundle_word == "ok" else {}
        steps = [s.as_json() for s in fold_steps(self._graph or {}, state, self.trace,
                                                 self.output, self.conversation)] \
            if bundle_word == "ok" else []
        return {"kind": "run", "at": at, "runId": self.run_id, "run": run,
                "graph": self._graph, "nodes": nodes, "steps": steps,
                "trace": list(self.trace), "output": list(self.output),
                "conversation": list(self.conversation), "transcript": list(self.transcript),
                "cut": dict(self.cut),
                "chain": members, "bundle": bundle_word}


def _node_ids(graph: Mapping[str, Any] | None) -> list[str]:
    return [n["id"] for n in (graph or {}).get("nodes") or []
            if isinstance(n, dict) and isinstance(n.get("id"), str)]


def states_at(doc: Mapping[str, Any], upto: int) -> dict[str, str]:
    """Each node's state after the first ``upto`` trace events (what replay shows);
    at the end, the live state the document holds."""
    trace = doc.get("trace") or []
    if upto >= len(trace) and doc.get("nodes"):
        return dict(doc["nodes"])
    return node_states({}, trace[:max(upto, 0)], nodes=_node_ids(doc.get("graph")))
