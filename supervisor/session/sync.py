"""Catch-up for a session that comes back: ``pi-workflows sync``.

Owns the snapshot protocol of seed 000 (decisions 10 and 11): what changed
since the session's watermark, each run once in its latest state, recomputed
from the store and the bundles; the watermark is moved before the snapshot
is shown and confirmed after (``protocol.store.catchup``), so a crash in
between loses nothing. The same call delivers the session's passive
notifications (leased, shown, then marked: once, or once more after a crash
in between) and its follow-up turns (resolved, then shown: never twice).
Imports ``protocol`` and ``views.status``; never ``host`` or ``cli``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...protocol.record import record
from ...protocol.states import (
    CLAIMED,
    PAUSED,
    UNSUCCESSFUL_STATUSES,
    QueueState,
    RunStatus,
    is_paused,
)
from ...protocol.store import CatchUp, Notification, QueueRow, Store, TurnIntent
from ...protocol.store.turns import AGENT_CANCELLED, CLAIM_LOST, PRESENTATION, RUN_FAILED
from ..views.decisions import request_line
from ..views.mounts import mount_note
from ..views.runtext import with_title
from ..views.status import host_running, run_status

Q, S = QueueState, RunStatus
MAX_OUTPUT_CHARS = 2000  # of a final output, in a snapshot
MAX_DELIVERED = 500  # notifications (and follow-ups) one sync delivers; the rest come next
FOLLOW_UP = ("Workflow {workflow} failed to start (run {run_id}): {reason}. Inspect the error"
             " and call workflow start again only after you correct the cause.")
# The other deferred turns (issue 22, item 6): what the model is told, by source event.
RAN_AND_FAILED = ("Workflow {workflow} (run {run_id}), which you started, {ended} after it"
                  " started [{code}]: {reason}. Inspect it (workflow tool, action status) and"
                  " tell the user; start it again only after you correct the cause.")
YOU_CANCELLED = ("Workflow {workflow} (run {run_id}), which you cancelled, has now stopped:"
                 " it ended cancelled and nothing of it runs any more.")
CLAIM_WAS_LOST = ("Workflow {workflow} (run {run_id}): this session no longer runs it, so its"
                  " step {node} (attempt {attempt}) is not yours to answer any more; do not"
                  " submit it. Check the run with the workflow tool (action status).")


@record
class Snapshot:
    session: str
    catch_up: CatchUp
    runs: list[dict[str, Any]]
    notifications: list[Notification]
    follow_ups: list[TurnIntent]
    notification_token: str | None = None
    intent_token: str | None = None
    held_token: str | None = None  # follow-ups leased, not resolved (``hold_follow_ups``)

    @property
    def empty(self) -> bool:
        return not (self.runs or self.notifications or self.follow_ups)

    def as_json(self) -> dict[str, Any]:
        return {
            "session": self.session, "watermark": self.catch_up.head,
            "since": self.catch_up.since, "firstSync": self.catch_up.first,
            "runs": self.runs,
            "notifications": [{"id": n.id, "runId": n.run_id, "nodeId": n.node_id,
                               "kind": n.kind, **n.payload} for n in self.notifications],
            "followUps": [{"intentId": t.intent_id, "runId": t.run_id, "cause": t.cause,
                           **t.payload, "kind": t.source_event, "message": _follow_up(t),
                           # A presentation enters the conversation hidden (item 7).
                           "hidden": t.source_event == PRESENTATION, **self._held()}
                          for t in self.follow_ups],
        }

    def _held(self) -> dict[str, Any]:
        return {} if self.held_token is None else {"token": self.held_token}


def _bounded(value: Any) -> tuple[Any, bool]:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    if len(text) <= MAX_OUTPUT_CHARS:
        return value, False
    return text[:MAX_OUTPUT_CHARS] + "…", True


def _change(row: QueueRow, runs_dir: Path, hosted: bool, session: str) -> dict[str, Any]:
    """One run's entry: its status object plus what a person should know or do.

    The queue row was read with the feed's head, so it decides the kind of
    change; the bundle (which may be a step ahead) supplies the details.
    """
    info = run_status(row, runs_dir)
    status = info.get("runStatus")
    # A change is named by the run status where the queue state says less.
    kind: str
    if row.state == Q.DONE:
        kind = S.WAITING if status == S.WAITING else S.COMPLETED
    elif row.state == Q.FAILED:
        kind = S.TIMED_OUT if status == S.TIMED_OUT else S.FAILED
    elif is_paused(row.state, row.error_code):
        kind = PAUSED  # held by `pause`: nothing runs it until `resume`
    else:
        kind = row.state
    info["change"] = kind
    # The session started it or was told about it (a client reports those as its own).
    info["mine"] = session in (row.origin_session, row.notify_session)
    if kind == S.COMPLETED:
        info["finalOutput"], info["finalOutputTruncated"] = _bounded(info.get("finalOutput"))
    else:
        info.pop("finalOutput", None)
    if kind == S.WAITING:
        what = "ANSWER" if info.get("request") else "TEXT..."  # a decision: one of its answers
        info["answerCommand"] = f"pi-workflows answer {row.run_id} {what} --session {session}"
    if kind == Q.PARKED:
        info["hostRunning"] = hosted
    if kind == PAUSED:
        info["resumeCommand"] = f"pi-workflows resume {row.run_id}"
    return info


def take(store: Store, runs_dir: Path, session: str, *, lease_ms: int | None = None,
         hold_follow_ups: bool = False) -> Snapshot:
    """Compute the snapshot and move the watermark; nothing is shown yet.

    With ``hold_follow_ups`` the follow-ups are only leased (for
    ``lease_ms``, or the store's lease): the client delivers each one and
    then resolves it with its token (``resolve-follow-up``), having checked
    its own transcript for the intent id first. A client that dies in
    between loses nothing; the follow-up comes again once the lease ends.
    """
    catch_up = store.begin_catch_up(session)
    hosted = host_running(store)
    runs = [_change(row, runs_dir, hosted, session) for row in catch_up.rows]
    note_token, notes = store.claim_notifications(session, lease_ms=lease_ms,
                                                  limit=MAX_DELIVERED)
    intent_token, intents = store.claim_turn_intents(session, lease_ms=lease_ms,
                                                     limit=MAX_DELIVERED)
    if hold_follow_ups:
        return Snapshot(session, catch_up, runs, notes, intents, note_token, None,
                        intent_token if intents else None)
    # A follow-up asks for a new model turn: a second one would be a second
    # turn, so it is resolved *before* it is shown (at most once). A crash in
    # between loses no information: the failed run is in this snapshot, and a
    # lost snapshot is shown again from ``pending_from``.
    for intent in intents:
        store.resolve_turn_intent(intent.intent_id, intent_token)
    return Snapshot(session, catch_up, runs, notes, intents, note_token, None)


def delivered(store: Store, snapshot: Snapshot) -> None:
    """The snapshot was shown: confirm the watermark, mark what was delivered."""
    store.end_catch_up(snapshot.catch_up)
    if snapshot.notification_token is not None:
        for note in snapshot.notifications:
            store.mark_notification_delivered(note.id, snapshot.notification_token)
    if snapshot.intent_token is not None:
        for intent in snapshot.follow_ups:
            store.resolve_turn_intent(intent.intent_id, snapshot.intent_token)


def follow_up_text(workflow: str, run_id: str, reason: str) -> str:
    """The turn a session's model is given after its launch failed (seed 002)."""
    return FOLLOW_UP.format(workflow=workflow, run_id=run_id, reason=reason.rstrip(". "))


def _follow_up(intent: TurnIntent) -> str:
    """The text of a follow-up turn, by the event that owes it."""
    p = intent.payload
    workflow, run_id = str(p.get("workflow", "?")), intent.run_id
    reason = str(p.get("error") or intent.cause).rstrip(". ")
    if intent.source_event == RUN_FAILED:
        ended = "timed out" if p.get("runStatus") == S.TIMED_OUT else "failed"
        return RAN_AND_FAILED.format(workflow=workflow, run_id=run_id, ended=ended,
                                     code=p.get("errorCode") or intent.cause, reason=reason)
    if intent.source_event == AGENT_CANCELLED:
        return YOU_CANCELLED.format(workflow=workflow, run_id=run_id)
    if intent.source_event == PRESENTATION:
        return str(p.get("message") or "")  # rendered and bounded by the worker
    if intent.source_event == CLAIM_LOST:
        return CLAIM_WAS_LOST.format(workflow=workflow, run_id=run_id,
                                     node=p.get("nodeId", "?"), attempt=p.get("attemptId", "?"))
    return follow_up_text(workflow, run_id, reason)


def run_line(info: dict[str, Any]) -> str:
    head = with_title(f"{info['runId']}  {info['workflow']}", info) + "  "
    kind = str(info["change"])
    node = info.get("currentNode")
    error = f" [{info.get('errorCode')}] {info.get('error') or ''}".rstrip()
    if kind == S.COMPLETED:
        out = info.get("finalOutput")
        shown = out if isinstance(out, str) else json.dumps(out, sort_keys=True)
        return head + f"completed: {shown}"
    if kind == S.WAITING:
        summary = f": {info['summary']}" if info.get("summary") else ""
        summary = " ".join(summary.split()) if summary else ""  # one line per run
        if info.get("request"):
            summary += f"; {request_line(info['request'])}"
        where = f"{info.get('waitingOn')}{mount_note(info.get('waitingOn'))}"
        return (head + f"waiting at {where}{summary}; answer with"
                f" `{info.get('answerCommand') or 'pi-workflows answer ' + info['runId']}`")
    if kind in UNSUCCESSFUL_STATUSES:
        return head + kind.replace("_", " ") + (error if kind != S.CANCELLED else "")
    if kind == Q.PARKED:
        why = error if info.get("errorCode") else ""
        who = ("a running host resumes it" if info.get("hostRunning")
               else "no host is running: start `pi-workflows host --background` to resume it")
        return head + f"parked at {node}{why}; {who}"
    if kind == PAUSED:
        return head + (f"paused before {node}" if node else "paused") + (
            f"; `{info.get('resumeCommand')}` continues it")
    if kind in CLAIMED:
        return head + kind + (f" at {node}" if node else "")
    return head + kind  # queued: waits for `activate` (a session's) or a host


def lines(snapshot: Snapshot) -> list[str]:
    out = [run_line(info) for info in snapshot.runs]
    for note in snapshot.notifications:
        workflow = note.payload.get("workflow") or "?"
        out.append(f"[{note.kind}] {workflow} ({note.run_id}): {note.payload.get('message', '')}")
    for intent in snapshot.follow_ups:
        if intent.source_event == PRESENTATION:  # a message for a model, not a line
            out.append(f"follow-up: the presentation of run {intent.run_id}"
                       f" ({intent.payload.get('workflow') or '?'})")
        else:
            out.append(f"follow-up: {_follow_up(intent)}")
    return out


def show(snapshot: Snapshot, echo: Callable[[str], None], *, quiet_when_empty: bool) -> None:
    if snapshot.empty:
        if not quiet_when_empty:
            echo(f"session {snapshot.session}: nothing new since the last sync")
        return
    for line in lines(snapshot):
        echo(line)
