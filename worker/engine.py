"""The engine: executes one workflow definition over one run bundle.

Owns the run's projection (``state``) and every transition of it: start,
route, checkpoint, pause, cancel, park, the explicit resume protocol and
continuation runs. Each transition is one fenced ``BundleWriter.append``;
the projection decides what happened. Imports ``protocol`` and worker
modules; never the supervisor.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from ..protocol.artifacts import REF_KEY, externalize, internalize, reserved_key_path
from ..protocol.bundle import BundleCorrupt
from ..protocol.bundlewriter import BundleWriter
from ..protocol.definitions.graph import (
    EFFECT_KINDS,
    TITLE_TIMEOUT_S,
    CheckpointNode,
    MountNode,
    NodeContext,
    Workflow,
    resolve_timeout,
    snapshot,
)
from ..protocol.definitions.routing import RoutingError, next_node, routes_failures
from ..protocol.definitions.values import OutputError, check_output
from ..protocol.errors import PiWorkflowsError
from ..protocol.fence import CancelPending, PausePending
from ..protocol.includepins import included_files, includes_changed
from ..protocol.limits import safe_error_message
from ..protocol.runstate import ErrorInfo, PendingEnd, RunState, ending, new_state
from ..protocol.states import (
    END_EVENT,
    PAUSED_CODE,
    SETTLED_STATUSES,
    Outcome,
    QueueState,
    RunStatus,
)
from .agent import AgentExecutor
from .control import Control
from .effects import EffectStore
from .mounts import counted, scoped, step_mount, steps_refused
from .nodes import STOP_GRACE_S, NodeOutcome, Watch
from .runinfo import (
    answer,
    detail_cleared,
    node_fields,
    run_info,
    start_fields,
    started_payload,
)
from .steps import run_step
from .stream import OutputStreams
from .updates import AttemptUpdates
from .waiting import waiting_output

OnNode = Callable[[str], None]
# What ``run`` returns when it stops without settling the bundle: parked
# (a drain, a lost claim), or held at a boundary by ``pause``.
PARKED = QueueState.PARKED
PAUSED = PAUSED_CODE
# Nodes whose ``ctx.publish_update`` records progress (an agent's through its tool).
UPDATE_KINDS = frozenset({"compute", "action", "shell", "agent"})
# What a requested cancel forbids: starting a node, and ending any way but cancelled.
CANCEL_GATE = frozenset({"node_started", "run_completed", "run_waiting", "run_failed",
                         "run_timed_out"})


class Notifier(Protocol):
    """Where notify nodes' messages go (the store), fenced by the run's claim."""

    def add_notification(self, session_id: str, run_id: str, node_id: str, idx: int,
                         kind: str, payload: dict[str, Any], *,
                         token: str | None = None) -> bool: ...


class ResumeRefused(PiWorkflowsError):
    code = "resume_refused"


class SourceChanged(PiWorkflowsError):
    code = "source_changed"


def _error(code: str, message: str) -> ErrorInfo:
    return {"code": code, "message": safe_error_message(message)}


class Engine:
    def __init__(self, workflow: Workflow, writer: BundleWriter, effects: EffectStore, *,
                 project_dir: Path, control: Control | None = None,
                 agent: AgentExecutor | None = None, notifier: Notifier | None = None,
                 session_id: str | None = None, park_grace_s: float = 5.0,
                 stop_grace_s: float = STOP_GRACE_S,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.workflow = workflow
        self.writer = writer
        self.effects = effects
        self.agent = agent
        self.run_id = writer.bundle.run_id
        self.workflow_name = workflow.name
        self.token = writer.token
        self.project_dir = project_dir
        self.control = control or Control()
        self.notifier = notifier
        self.session_id = session_id
        self.park_grace_s = park_grace_s
        self.stop_grace_s = stop_grace_s
        self.monotonic = monotonic
        self.state: RunState = {}
        self.on_node: OnNode | None = None  # process titles
        self.output: OutputStreams | None = None  # shell output while it runs
        # The store's cancel flag is read by the fence of every write; these
        # events are refused once it is set (the run is cancelled instead).
        writer.cancel_gate = CANCEL_GATE
        writer.pause_gate = frozenset({"node_started"})
        self._write_lock = threading.Lock()
        self.title_timeout_s = TITLE_TIMEOUT_S
        self._title_payload: dict[str, Any] = {}

    # ---- writing ------------------------------------------------------

    def _transition(self, event_type: str, payload: dict[str, Any], changes: RunState, *,
                    node_id: str | None = None, attempt_id: str | None = None,
                    merge: dict[str, dict[str, Any]] | None = None) -> None:
        """Append one event with the projection it leads to; adopt it only once written.

        ``merge`` patches ``outputs``/``results`` entry by entry, so the writer
        can record a delta the size of the step, not of the run.
        """
        with self._write_lock:
            after = RunState(**self.state)
            after.update(changes)
            for key, patch in (merge or {}).items():
                after[key] = {**self.state[key], **patch}  # type: ignore[literal-required]
            self.writer.append(event_type, payload, after, node_id=node_id,
                               attempt_id=attempt_id, delta=(changes, merge or {}))
            self.state = after

    def note(self, event_type: str, payload: dict[str, Any], node_id: str,
             attempt_id: str) -> None:
        self._transition(event_type, payload, {}, node_id=node_id, attempt_id=attempt_id)

    def keep(self, value: Any) -> Any:
        """Move large strings of an effect result into artifacts before the store records it.

        The store's record is durable on its own, so the artifacts it points at
        are synced under every policy but ``never``.
        """
        artifacts = self.writer.bundle.artifacts
        artifacts.sync = self.writer.fsync != "never"
        return externalize(value, artifacts.put)

    def restore(self, value: Any) -> Any:
        try:
            return internalize(value, self.writer.bundle.artifacts.get)
        except (OSError, ValueError) as exc:
            raise BundleCorrupt(f"run {self.run_id}: a recorded effect result is missing its"
                                f" artifact ({type(exc).__name__})") from None

    def notify(self, node_id: str, idx: int, kind: str, message: str) -> None:
        if self.notifier is not None and self.session_id is not None:
            self.notifier.add_notification(self.session_id, self.run_id, node_id, idx, kind,
                                           {"message": message, "workflow": self.workflow.name},
                                           token=self.token)

    # ---- creating and reopening -----------------------------------------

    def create(self, *, run_input: Any, source: dict[str, str], digest: str,
               parent: dict[str, Any] | None = None) -> None:
        """Lay out a new bundle and write ``run_started``.

        ``parent`` (for a continuation) is ``{"runId", "state", "answer"}``:
        outputs, results and steps carry over, and the answered checkpoint
        is the first node, finishing with the answer as its output.
        """
        wf = self.workflow
        state = new_state(self.run_id, wf.name, wf.start_at, run_input)
        if parent is not None:
            pstate = parent["state"]
            state.update({
                "input": pstate.get("input"), "outputs": dict(pstate.get("outputs", {})),
                "results": dict(pstate.get("results", {})), "steps": int(pstate.get("steps", 0)),
                "currentNode": pstate["waitingNode"], "answeredNode": pstate["waitingNode"],
                # The checkpoint's step was counted by the parent.
                "currentAttempt": pstate.get("currentAttempt") or "answered",
                "parentRunId": parent["runId"], "answer": parent["answer"],
                **({"mountSteps": pstate["mountSteps"]} if "mountSteps" in pstate else {}),
            })
        # The title is resolved once, here, before the bundle exists: a crash
        # meanwhile leaves nothing, and every later read is of the recorded one.
        fields, self._title_payload = start_fields(
            wf, state["input"], None if parent is None else parent["state"], self.control,
            self.title_timeout_s)
        state.update(fields)  # type: ignore[typeddict-item]
        manifest = {"workflow": wf.name, "source": source, "digest": digest,
                    "parentRunId": state["parentRunId"], **included_files(wf)}
        self.writer.create(manifest, snapshot(wf), state)
        self.state = state
        self._started(digest)

    def _started(self, digest: Any) -> None:
        self._transition("run_started", {
            "workflow": self.workflow.name, "digest": digest,
            "parentRunId": self.state.get("parentRunId"),
            "carriedSteps": self.state.get("steps", 0),
            "startAt": self.state.get("currentNode"),
            **(self._title_payload or started_payload(self.state))}, {})

    def reopen(self, *, source_sha256: str | None, digest: str, force: bool = False) -> None:
        """The resume protocol: repair, pin the source, write the resume boundary."""
        state, report = self.writer.reopen()
        status = state.get("status")
        if status in SETTLED_STATUSES:
            raise ResumeRefused(f"run {self.run_id} is {status}; only an interrupted run resumes")
        pinned = self.writer.manifest
        expected_sha = (pinned.get("source") or {}).get("sha256")
        mismatch = None
        changed = includes_changed(pinned, self.workflow)
        if expected_sha != source_sha256 or pinned.get("digest") != digest or changed:
            mismatch = {"expectedSha256": expected_sha, "actualSha256": source_sha256,
                        "expectedDigest": pinned.get("digest"), "actualDigest": digest,
                        **({"includes": changed} if changed else {})}
            if not force and changed and expected_sha == source_sha256:
                raise SourceChanged(
                    f"the included workflow file {changed[0]['path']} of run {self.run_id}"
                    " changed since the run started (source pinning); check the change, then"
                    f" `pi-workflows resume {self.run_id} --force` to continue on it, or"
                    " cancel the run")
            if not force:
                raise SourceChanged(
                    f"the workflow file of run {self.run_id} changed since the run started"
                    " (source pinning); check the change, then `pi-workflows resume"
                    f" {self.run_id} --force` to continue on it, or cancel the run")
        self.state = state
        if report.kept_seq == 0:
            # The crash came between laying out the bundle and its first event:
            # every trace starts with run_started, so write it before the boundary.
            self._started(pinned.get("digest"))
        self._transition("run_resumed", {
            "boundary": True, "resumePoint": state.get("currentNode"),
            "interruptedAttempt": state.get("currentAttempt"),
            "replayedSteps": state.get("steps", 0), "droppedTraceLines": report.dropped_lines,
            "sourceMismatch": mismatch, "forced": bool(force and mismatch)}, {"paused": False})

    # ---- the loop -------------------------------------------------------

    def run(self) -> str:
        """Run until the bundle settles or the run is parked; return the outcome."""
        while True:
            status = self.state["status"]
            if status in SETTLED_STATUSES:
                return str(status)
            # A cancel beats a park asked for at the same time (a drain): the
            # person asked for the run to end, not to come back later.
            if self.control.cancel_requested:
                self._end("run_cancelled", _error("cancelled", "the run was cancelled"))
                continue
            if self.control.park_requested:
                return PARKED
            node_id = self.state["currentNode"]
            if self.control.pause_requested and node_id is not None:
                # A boundary: the node before has ended (its result is kept) and
                # the next has not started. With no node left, the run just ends.
                self._transition("run_paused", {"at": node_id}, {"paused": True})
                return PAUSED
            try:
                if node_id is None:
                    self._finish_pending()
                else:
                    self._step(node_id)
            except CancelPending:
                # Asked for since the last renewal: it wins at this boundary at
                # the latest, so no further node starts and nothing completes.
                self.control.request_cancel()
            except PausePending:
                # Likewise a pause: the next node does not start.
                self.control.request_pause()

    def _end(self, event_type: str, error: ErrorInfo | None = None,
             output: Any = None) -> None:
        changes, payload = ending(event_type, error, output)
        self._transition(event_type, payload, changes)

    def _finish_pending(self) -> None:
        """Write the terminal event the projection already decided on."""
        pending: PendingEnd = self.state.get("pendingEnd") or {"type": "run_completed"}
        last = self.state.get("lastNode")
        output = self.state["outputs"].get(last) if last else None
        self._end(pending["type"], pending.get("error"), output)

    def _context(self, node_id: str, attempt: str, stop: threading.Event, *,
                 interrupted: str | None = None, steps: int | None = None,
                 updates: AttemptUpdates | None = None) -> NodeContext:
        info = run_info({**self.state, **({} if steps is None else {"steps": steps})})
        publish: dict[str, Any] = {} if updates is None else {"updates": updates}
        return NodeContext(
            run_id=self.run_id, node_id=node_id, attempt_id=attempt, input=self.state["input"],
            outputs=MappingProxyType(dict(self.state["outputs"])),
            results=MappingProxyType(dict(self.state["results"])), cancel=stop,
            project_dir=self.project_dir, interrupted_attempt=interrupted,
            state=info, answer=answer(self.state), **publish)

    def _step(self, node_id: str) -> None:
        wf = self.workflow
        node = wf.nodes.get(node_id)
        if node is None:
            self._end("run_failed", _error("node_missing",
                                           f"node {node_id!r} is not in the workflow definition"))
            return
        if isinstance(node, MountNode):  # an include's entry or exit: not a step
            step_mount(self, node)
            return
        interrupted = self.state.get("currentAttempt")
        rerun = interrupted is not None
        steps = int(self.state["steps"])
        if not rerun:
            if steps >= wf.max_steps:
                self._end("run_failed", _error(
                    "max_steps_exceeded",
                    f"the run reached max_steps={wf.max_steps} before node {node_id!r}"))
                return
            refused = steps_refused(wf, self.state, node_id)
            if refused:
                self._end("run_failed", _error("max_steps_exceeded", refused))
                return
            steps += 1
        attempt = f"{node_id}-{steps}-{secrets.token_hex(3)}"
        stop = threading.Event()
        updates = None if node.kind not in UPDATE_KINDS else AttemptUpdates(
            lambda kind, p: self.note(kind, p, node_id, attempt), monotonic=self.monotonic)
        ctx = self._context(node_id, attempt, stop, steps=steps,
                            interrupted=str(interrupted) if interrupted is not None else None,
                            updates=updates)
        ctx = scoped(self.state, ctx)  # inside an include: the child's own view
        detail, noted = node_fields(node, ctx, self.control)  # recorded before the node runs
        self._transition("node_started", {"step": steps, "rerun": rerun, **noted},
                         {"currentNode": node_id, "currentAttempt": attempt, "steps": steps,
                          **({} if rerun else counted(self.state, node_id)),
                          **detail_cleared(self.state), **detail},  # type: ignore[typeddict-item]
                         node_id=node_id, attempt_id=attempt)
        if self.on_node is not None:
            self.on_node(node_id)
        if isinstance(node, CheckpointNode):
            if self.state.get("answeredNode") == node_id:
                answered = NodeOutcome(Outcome.OK, output=self.state.get("answer"))
                self._settle(node_id, attempt, answered)
            else:
                self._wait_at(node, ctx)
            return
        try:
            timeout_s = resolve_timeout(node, wf, ctx)
        except Exception as exc:
            if updates is not None:
                updates.close()
            self._settle(node_id, attempt, NodeOutcome(
                Outcome.FAILED, error_code="timeout_invalid", error=safe_error_message(str(exc))))
            return
        watch = Watch(self.control, stop, timeout_s,
                      effectful=node.kind in EFFECT_KINDS, park_grace_s=self.park_grace_s,
                      stop_grace_s=self.stop_grace_s, monotonic=self.monotonic)
        self.writer.disk_full = None
        try:
            outcome = run_step(self, node, ctx, watch, timeout_s, steps)
        finally:
            if updates is not None:
                updates.close()  # the last update is written before the node's end
        if self.writer.disk_full is not None:
            # A write of this attempt (an agent's note, say) did not fit and may have
            # failed the node from inside: record nothing it shaped; the run waits.
            raise self.writer.disk_full
        if outcome.outcome == Outcome.CANCELLED and self.control.park_requested \
                and not self.control.cancel_requested:
            return  # parked: no attempt and no terminal event are recorded
        self._settle(node_id, attempt, outcome)

    def _wait_at(self, node: CheckpointNode, ctx: NodeContext) -> None:
        output = waiting_output(node, ctx, self.workflow, self.control,
                                park_grace_s=self.park_grace_s, stop_grace_s=self.stop_grace_s,
                                monotonic=self.monotonic)
        if isinstance(output, NodeOutcome):
            if output.outcome == Outcome.CANCELLED and self.control.park_requested \
                    and not self.control.cancel_requested:
                return  # parked while run= computed: the checkpoint runs again on resume
            self._settle(node.id, ctx.attempt_id, output)
            return
        self._transition("run_waiting", {"waitingNode": node.id, "output": output},
                         {"status": RunStatus.WAITING, "waitingNode": node.id,
                          "waitingOutput": output, "currentNode": node.id},
                         node_id=node.id, attempt_id=ctx.attempt_id)

    def _settle(self, node_id: str, attempt: str, outcome: NodeOutcome) -> None:
        """Record the attempt's result and where the run goes next."""
        output = outcome.output
        if outcome.outcome == Outcome.OK:
            try:
                output = check_output(node_id, output)
                reserved = reserved_key_path(output)
                if reserved:
                    raise OutputError([f"output of node {node_id!r} uses the reserved key"
                                       f" {REF_KEY!r} at {reserved}"])
            except OutputError as exc:
                outcome = NodeOutcome(Outcome.FAILED, error_code="output_invalid",
                                      error=safe_error_message(exc.message))
                output = None
        record = outcome.record()
        ok = outcome.outcome == Outcome.OK
        pending: PendingEnd | None = None
        nxt: str | None = None
        if ok or (routes_failures(self.workflow, node_id) and outcome.outcome != Outcome.CANCELLED):
            try:
                nxt = next_node(self.workflow, node_id, output, record)
            except RoutingError as exc:
                pending = {"type": "run_failed", "error": _error("routing_failed", exc.message)}
            if nxt is None and pending is None:
                pending = {"type": "run_completed"} if ok else {
                    "type": END_EVENT[outcome.outcome],
                    "error": _error(outcome.error_code or "node_failed",
                                    outcome.error or "the node failed")}
        else:
            pending = {"type": END_EVENT[outcome.outcome],
                       "error": _error(outcome.error_code or "node_failed",
                                       f"node {node_id!r}: {outcome.error or outcome.outcome}")}
        merge: dict[str, dict[str, Any]] = {"results": {node_id: record}}
        if ok or output is not None:
            merge["outputs"] = {node_id: output}
        event = "node_finished" if ok else "node_failed"
        payload: dict[str, Any] = {"result": record, "next": nxt}
        if ok or output is not None:  # a failed shell step's output is evidence for `logs`
            payload["output"] = output
        if outcome.traceback is not None and not ok:
            payload["traceback"] = outcome.traceback
        self._transition(event, payload, {
            "currentNode": nxt, "currentAttempt": None,
            "lastNode": node_id, "pendingEnd": pending, "answeredNode": None,
            **detail_cleared(self.state)},  # type: ignore[typeddict-item]
            node_id=node_id, attempt_id=attempt, merge=merge)
