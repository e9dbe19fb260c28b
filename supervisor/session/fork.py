"""Forking a settled run: a new run that starts at one of its nodes, carrying what came before.

Owns the rules of ``pi-workflows fork``: which runs may be forked, the
default node (where a failed run failed), what the fork carries (the
original's projection as it stood just before that node's last attempt,
rebuilt from the original's trace and projection), pinning the current
workflow source (a changed one only when forced, and then recorded), and
laying the fork's bundle out *before* its queue row exists, so no runner
ever sees a fork without its bundle: a host then picks it up at the node
through the ordinary resume protocol. The original's bundle and queue row
are only read, never written. Imports protocol modules and ``views.nextcmd``
(where a run failed, the advice for an answered run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...protocol.artifacts import internalize
from ...protocol.bundle import Bundle, BundleCorrupt
from ...protocol.bundlewriter import BundleWriter
from ...protocol.definitions.compose import SEP, enclosing_mounts
from ...protocol.definitions.discovery import LoadedWorkflow, WorkflowLoadError, load_workflow_file
from ...protocol.definitions.graph import snapshot
from ...protocol.errors import ClaimLost, UsageError
from ...protocol.includepins import included_files
from ...protocol.runid import new_run_id
from ...protocol.runstate import RunState, new_state
from ...protocol.states import SETTLED_STATUSES, TERMINAL, QueueState, RunStatus, seen_status
from ...protocol.store import QueueRow, Store
from ..views.nextcmd import FAILED_STATUSES, SETTLE_EVENTS, answered_advice, failed_node
from ..views.wording import cli
from .launch import run_source

MOUNT_PASSES = ("include_entered", "include_exited")  # an include's entry or exit passed


@dataclass(frozen=True)
class Carried:
    """What a fork takes over from the original run."""

    outputs: dict[str, Any]
    results: dict[str, Any]
    steps: int
    last_node: str | None
    # Each open include's steps of its current invocation (``state.mountSteps``).
    mount_steps: dict[str, int] = field(default_factory=dict)
    # The answer of the continuation the node ran in (``ctx.answer``), if it ran in one.
    answer: tuple[Any] | None = None


@dataclass(frozen=True)
class ForkPlan:
    """A fork that passed every check; ``lay_out`` and ``enqueue`` make it durable."""

    run_id: str
    original: str
    node: str
    loaded: LoadedWorkflow
    input: Any
    carried: Carried
    mismatch: dict[str, Any] | None
    # The original's title and start (a fork keeps its chain's title, never resolved again).
    title: str | None = None
    started_at: str | None = None

    def state(self) -> RunState:
        state = new_state(self.run_id, self.loaded.name, self.node, self.input)
        state.update({"outputs": self.carried.outputs, "results": self.carried.results,
                      "steps": self.carried.steps, "lastNode": self.carried.last_node,
                      "forkedFrom": self.original, "forkNode": self.node,
                      "startedAt": self.started_at})
        if self.title is not None:
            state["title"] = self.title
        if self.carried.mount_steps:
            state["mountSteps"] = self.carried.mount_steps
        if self.carried.answer is not None:
            state["answer"] = self.carried.answer[0]
        return state

    def started(self) -> dict[str, Any]:
        """The fork's ``run_started`` payload."""
        return {"workflow": self.loaded.name, "digest": self.loaded.digest, "parentRunId": None,
                "carriedSteps": self.carried.steps, "startAt": self.node,
                "forkedFrom": self.original, "forkNode": self.node,
                "carriedNodes": sorted(self.carried.outputs), "sourceMismatch": self.mismatch,
                "forced": self.mismatch is not None,
                **({} if self.title is None else {"title": self.title})}


class Unqueued:
    """The fence for a fork's bundle while the fork has no queue row yet.

    Its run id is new and no runner claims a run that is not in the queue,
    so holding the bundle lock while the row does not exist proves the
    layout is the only writer.
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def verify(self, run_id: str, token: str) -> None:
        if self.store.get(run_id) is not None:
            raise ClaimLost(f"run {run_id} is already queued")


def _cut(events: list[dict[str, Any]], node: str) -> tuple[int, int | None]:
    """(index where ``node``'s last attempt began, the steps taken before it), or (len, None)."""
    starts = [i for i, e in enumerate(events)
              if e["type"] == "node_started" and e.get("nodeId") == node]
    if not starts:  # an include's entry or exit: passed, or its input failed; no step
        starts = [i for i, e in enumerate(events) if e.get("nodeId") == node
                  and e["type"] in (*MOUNT_PASSES, "node_failed")]
    if not starts:
        return len(events), None
    if events[starts[-1]]["type"] != "node_started":
        before = [int(e["payload"].get("step") or 0) for e in events[:starts[-1]]
                  if e["type"] == "node_started"]
        return starts[-1], max(before, default=0)
    step = events[starts[-1]]["payload"].get("step")
    # A resumed attempt starts again with the same step: the cut is its first start.
    cut = next(i for i in starts if events[i]["payload"].get("step") == step)
    return cut, max(int(step or 1) - 1, 0)


def history(runs_dir: Path, run_id: str, state: RunState, depth: int = 0) -> list[dict[str, Any]]:
    """The node events that led to ``state``: the run's own trace after its ancestors'.

    A continuation started from its parent's whole projection and a fork from
    its original's up to the fork node's cut, so their traces alone would
    not say when the carried nodes ran. Payloads come back with artifacts
    resolved. An ancestor whose bundle is gone or unreadable ends the chain
    there: what it carried then counts as having run before everything.
    """
    bundle = Bundle(runs_dir, run_id)
    own = [internalize(e, bundle.artifacts.get) if e["type"] == "node_finished" else e
           for e in bundle.events()]
    parent, original = state.get("parentRunId"), state.get("forkedFrom")
    if depth >= 100 or not (parent or original):
        return own
    try:
        before_state = Bundle(runs_dir, str(parent or original)).state()
        before = history(runs_dir, str(parent or original), before_state, depth + 1)
    except (BundleCorrupt, OSError, ValueError):
        return own
    if not parent:
        before = before[:_cut(before, str(state.get("forkNode")))[0]]
    return before + own


def carry(events: list[dict[str, Any]], final: RunState, node: str) -> Carried:
    """The projection just before ``node``'s last attempt (or all of it, if it never ran).

    ``events`` is the run's ``history``. The final projection holds each
    node's latest output; a node that ended again at or after that point (a
    loop) gets back the output it had before, from the trace.
    """
    cut, before_steps = _cut(events, node)
    steps = int(final.get("steps", 0)) if before_steps is None else before_steps
    redone = {e.get("nodeId") for e in events[cut:] if e["type"] in SETTLE_EVENTS}
    # An include's entry or exit passed only after the cut is the future: not carried.
    # (One passed before as well keeps its latest value: the trace has no other.)
    passed = {e.get("nodeId") for e in events[:cut] if e["type"] in MOUNT_PASSES}
    redone |= {e.get("nodeId") for e in events[cut:]
               if e["type"] in MOUNT_PASSES and e.get("nodeId") not in passed}
    outputs = {k: v for k, v in (final.get("outputs") or {}).items() if k not in redone}
    results = {k: v for k, v in (final.get("results") or {}).items() if k not in redone}
    last: str | None = None
    for event in events[:cut]:
        if event["type"] not in SETTLE_EVENTS:
            continue
        last = event.get("nodeId")
        if last not in redone or last is None:
            continue
        payload = event["payload"]
        results[last] = payload.get("result")
        if event["type"] == "node_finished":
            outputs[last] = payload.get("output")
    return Carried(outputs, results, steps, last, _mount_steps(events[:cut]),
                   _answer(events[:cut]))


def _answer(events: list[dict[str, Any]]) -> tuple[Any] | None:
    """The answer the run ``events`` lead up to was continuing with, if any: a
    continuation's first node is its answered checkpoint, finished with the answer."""
    found: tuple[Any] | None = None
    answered: str | None = None
    for event in events:
        kind, payload = event["type"], event.get("payload") or {}
        if kind == "run_started" and payload.get("parentRunId"):
            answered = payload.get("startAt")
        elif kind == "run_started" and not payload.get("forkedFrom"):
            found = answered = None  # a chain's first run: no answer yet
        elif kind == "node_finished" and answered is not None \
                and event.get("nodeId") == answered:
            found, answered = (payload.get("output"),), None
    return found


def _mount_steps(events: list[dict[str, Any]]) -> dict[str, int]:
    """``state.mountSteps`` after ``events``, counted as the engine counts them."""
    counts: dict[str, int] = {}
    for event in events:
        kind, payload = event["type"], event.get("payload") or {}
        if kind in MOUNT_PASSES:
            mount = str(payload.get("mount"))
            counts = {k: v for k, v in counts.items()
                      if k != mount and not k.startswith(mount + SEP)}
            if kind == "include_entered":
                counts[mount] = 0
        elif kind == "node_started" and not payload.get("rerun"):
            for mount in enclosing_mounts(str(event.get("nodeId"))):
                counts[mount] = counts.get(mount, 0) + 1
    return counts


def _settled(row: QueueRow, final: RunState, project: Path | None = None) -> None:
    run_id = row.run_id
    if row.state not in TERMINAL:
        raise UsageError(f"run {run_id} is {row.state}; only a run that has ended can be"
                         " forked: wait for it, or cancel it first", code="not_settled")
    # A wait closed by `cancel` is over: such a run is forked like a cancelled one.
    if seen_status(row.state, final.get("status"), row.cancel_requested) == RunStatus.WAITING:
        answer = cli(project, "answer", run_id, blank='"your answer"')
        raise UsageError(f"run {run_id} waits at checkpoint {final.get('waitingNode')!r}; a"
                         f" waiting run is answered (`{answer}`), not forked",
                         code="run_waiting")


def _load(row: QueueRow, manifest: dict[str, Any]) -> LoadedWorkflow:
    path = (manifest.get("source") or {}).get("path") or row.source_path
    try:
        return load_workflow_file(path)
    except WorkflowLoadError as exc:
        raise UsageError(f"the workflow file of run {row.run_id} does not load, so it cannot be"
                         f" forked: {exc.message}", code="workflow_invalid") from None


def _mismatch(manifest: dict[str, Any], loaded: LoadedWorkflow) -> dict[str, Any] | None:
    pinned = manifest.get("source") or {}
    if (pinned.get("sha256"), manifest.get("digest")) == (loaded.source.sha256, loaded.digest):
        return None
    return {"expectedSha256": pinned.get("sha256"), "actualSha256": loaded.source.sha256,
            "expectedDigest": manifest.get("digest"), "actualDigest": loaded.digest}


def _choose(row: QueueRow, final: RunState, events: list[dict[str, Any]],
            loaded: LoadedWorkflow, from_node: str | None) -> str:
    nodes = ", ".join(loaded.workflow.nodes)
    status = seen_status(row.state, final.get("status"), row.cancel_requested)
    if status not in SETTLED_STATUSES:  # the queue ended it, the bundle never heard
        status = RunStatus.FAILED if row.state == QueueState.FAILED else RunStatus.CANCELLED
    node = from_node
    if node is None:
        if status not in FAILED_STATUSES:
            raise UsageError(f"run {row.run_id} is {status}, so there is no failed node to fork"
                             f" from: name one with --from (nodes: {nodes})",
                             code="node_required")
        node = failed_node(events)
        if node is None:
            raise UsageError(f"run {row.run_id} failed between nodes; name the node to fork"
                             f" from with --from (nodes: {nodes})", code="node_required")
        if node not in loaded.workflow.nodes:
            raise UsageError(f"run {row.run_id} failed at node {node!r}, which its workflow no"
                             f" longer has; name a node with --from (nodes: {nodes})",
                             code="node_unknown")
    if node not in loaded.workflow.nodes:
        raise UsageError(f"node {node!r} is not in workflow {loaded.name!r}; its nodes are:"
                         f" {nodes}", code="node_unknown")
    return node


def plan_fork(runs_dir: Path, row: QueueRow, from_node: str | None, *,
              force: bool = False, project: Path | None = None) -> ForkPlan:
    """Every check of a fork, before anything is written."""
    bundle = Bundle(runs_dir, row.run_id)
    if not bundle.exists():
        if row.state not in TERMINAL:
            _settled(row, {})
        raise UsageError(f"run {row.run_id} never started (it has no bundle), so there is"
                         " nothing to fork; start the workflow again", code="bundle_missing")
    final = bundle.state()
    _settled(row, final, project)
    manifest = bundle.manifest()
    loaded = _load(row, manifest)
    mismatch = _mismatch(manifest, loaded)
    events = history(runs_dir, row.run_id, final)
    node = _choose(row, final, events, loaded, from_node)
    if mismatch is not None and not force:
        raise UsageError(f"the workflow file {loaded.source.path} changed since run"
                         f" {row.run_id} started; check the change, then fork with --force"
                         " to run the fork on it (the change is recorded in the fork's trace)",
                         code="source_changed")
    carried = carry(events, final, node)
    return ForkPlan(new_run_id(loaded.name), row.run_id, node, loaded, final.get("input"),
                    carried, mismatch, final.get("title"), final.get("startedAt"))


def lay_out(store: Store, runs_dir: Path, plan: ForkPlan, *, fsync: str = "node") -> None:
    """Write the fork's bundle: manifest, snapshot, projection at ``node``, ``run_started``."""
    writer = BundleWriter(Bundle(runs_dir, plan.run_id), Unqueued(store), "", fsync=fsync)
    loaded = plan.loaded
    manifest = {"workflow": loaded.name,
                "source": {"path": loaded.source.path, "sha256": loaded.source.sha256},
                "digest": loaded.digest, "parentRunId": None, "forkedFrom": plan.original,
                "forkNode": plan.node, **included_files(loaded.workflow)}
    state = plan.state()
    writer.create(manifest, snapshot(loaded.workflow), state)
    writer.append("run_started", plan.started(), state)


def fork_run(store: Store, runs_dir: Path, row: QueueRow, from_node: str | None, *,
             force: bool = False, notify_session: str | None = None,
             fsync: str = "node", project: Path | None = None,
             agent_dir: str | None = None) -> tuple[ForkPlan, QueueRow]:
    """Check, lay out the bundle, then queue the fork for the host (with ``agent_dir``,
    the forking shell's Pi agent dir, recorded as any launch's).

    Interrupted between the two writes, the fork's bundle stays behind
    without a queue row: nothing ever runs it, and forking again makes a
    new one.
    """
    answered = store.continuation_of(row.run_id)
    if answered is not None:
        # The chain goes on past this run, and "answer it" would fail: name the
        # command that works on the chain's live end.
        raise UsageError(answered_advice(store, runs_dir, row, answered, verb="fork",
                                         project=project), code="run_answered")
    plan = plan_fork(runs_dir, row, from_node, force=force, project=project)
    lay_out(store, runs_dir, plan, fsync=fsync)
    queued = store.enqueue_detached(plan.run_id, run_source(plan.loaded), None,
                                    notify_session=notify_session,
                                    fork=(plan.original, plan.node), agent_dir=agent_dir)
    return plan, queued
