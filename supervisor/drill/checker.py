"""The drill's invariants, checked over durable state alone (``durable.Durable``).

Owns each violation kind and the rule that finds it; ``check`` runs them
all. Mid-drill (``final=False``) only what must hold at every instant is
checked; after the drill settled (``final=True``) also that nothing is
lost, stuck, left running or out of step. docs/drills.md says each rule in
plain words. Imports ``protocol.states`` and ``supervisor.drill.durable``;
never the worker.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ...protocol.states import SETTLED_STATUSES, TERMINAL, QueueState
from .durable import CONTROLLER_CHILD, Durable, RunFacts

Q = QueueState

KINDS = (
    "run_lost", "run_stuck", "queue_bundle_mismatch", "trace_seq", "trace_seq_behind",
    "node_finished_twice", "effect_applied_twice", "effect_missing", "stale_write",
    "write_after_end", "watermark_backwards", "activated_twice", "delivered_twice",
    "follow_up_lost", "leftover_process", "loose_permissions", "unexpected_failure",
    "clock_step_restart",  # judged by the clock_step fault itself (drill/clockstep.py)
    "host_exited", "disk_full_mishandled", "step_accepted_twice", "turn_sent_twice",
    "effect_repeated", "status_lost", "resource_stuck",  # the controllers' (issue 24)
)
# A run's error that says its disk was full: it should have waited, not ended.
DISK_FULL_WORDS = ("No space left on device", "Disk quota exceeded", "Errno 28", "Errno 122",
                   "ENOSPC", "EDQUOT", "no space left on device")
# How a drill run may fail: each is what one of its faults, or its doomed launches,
# leaves behind (a Pi killed mid-step, an effect killed in flight, a workflow file
# edited before activation, a worker killed again and again). Nothing in its
# workload fails by itself, so any other code is a fault that broke a run.
EXPECTED_FAILURES = frozenset({"agent_exited", "effect_indeterminate", "source_changed",
                               "worker_crash_loop"})
ENDS = ("node_finished", "node_failed")
# An include's entry and exit route too (their ``next``), without being steps.
MOUNT_PASSES = ("include_entered", "include_exited")
FINAL_EVENTS = ("run_completed", "run_failed", "run_timed_out", "run_cancelled", "run_waiting")
QUEUE_FOR_STATUS = {"completed": "done", "waiting": "done", "failed": "failed",
                    "timed_out": "failed", "cancelled": "cancelled"}


@dataclass(frozen=True)
class Violation:
    kind: str
    run_id: str | None
    evidence: str

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


Found = list[Violation]


def parse_trace(data: bytes) -> tuple[list[dict[str, Any] | None], bool]:
    """Every complete line (None: not a JSON object) and whether a torn tail follows."""
    *complete, tail = data.split(b"\n")
    events: list[dict[str, Any] | None] = []
    for line in complete:
        try:
            value = json.loads(line)
        except ValueError:
            value = None
        events.append(value if isinstance(value, dict) else None)
    return events, bool(tail)


def _settled(run: RunFacts) -> bool:
    return run.state is not None and str(run.state.get("status")) in SETTLED_STATUSES


def check_trace(run: RunFacts, final: bool, out: Found) -> list[dict[str, Any]]:
    """Seqs exactly 1..n, a ``traceSeq`` that neither leads nor lags; the valid events."""
    if run.trace is None:
        return []
    lines, torn = parse_trace(run.trace)
    events = [e for e in lines if e is not None]
    seqs = [e.get("seq") for e in events]
    if len(events) != len(lines):
        out.append(Violation("trace_seq", run.run_id,
                             f"{len(lines) - len(events)} complete line(s) are not JSON objects"))
    elif seqs != list(range(1, len(seqs) + 1)):
        wrong = next(i for i, s in enumerate(seqs, 1) if s != i)
        out.append(Violation("trace_seq", run.run_id,
                             f"line {wrong} has seq {seqs[wrong - 1]!r}; seqs {seqs[:12]}..."))
    if events and events[0].get("type") != "run_started":
        out.append(Violation("trace_seq", run.run_id,
                             f"the first event is {events[0].get('type')!r}, not run_started"))
    if torn and (final or _settled(run)):
        size = len(run.trace) - run.trace.rfind(b"\n") - 1
        out.append(Violation("trace_seq", run.run_id,
                             f"a torn last line ({size} bytes) in a settled bundle"))
    if run.state is not None:
        seq = int(run.state.get("traceSeq", 0))
        last = len(lines)  # a garbled line still took its seq
        if seq > last:
            out.append(Violation("trace_seq_behind", run.run_id,
                                 f"traceSeq {seq} but the trace has {last} line(s): lost lines"))
        elif (final or _settled(run)) and seq != last:
            out.append(Violation("trace_seq_behind", run.run_id,
                                 f"settled at traceSeq {seq} with {last} trace line(s)"))
        else:
            before = last if run.trace_before is None else len(parse_trace(run.trace_before)[0])
            if before - seq > 1:
                out.append(Violation("trace_seq_behind", run.run_id,
                                     f"traceSeq {seq} is {before - seq} lines behind the trace"))
    return events


def check_history(run: RunFacts, events: list[dict[str, Any]], out: Found) -> None:
    """Nodes end only when routed to; no old attempt writes after a resume; nothing
    follows the run's end; the run starts once."""
    entries: Counter[str] = Counter()
    ends: Counter[str] = Counter()
    ended_attempts: Counter[str] = Counter()
    seen: set[str] = set()  # attempts opened so far
    superseded: set[str] = set()  # attempts opened before the latest resume boundary
    boundary_at: dict[str, int] = {}  # superseded attempt -> when its run was resumed
    finished: str | None = None
    starts = 0
    for event in events:
        kind, attempt = event.get("type"), event.get("attemptId")
        payload = event.get("payload") or {}
        if finished is not None:
            out.append(Violation("write_after_end", run.run_id,
                                 f"seq {event.get('seq')} {kind} after {finished}"))
            finished = None  # one is enough
        if attempt in superseded:
            out.append(Violation("stale_write", run.run_id,
                                 f"seq {event.get('seq')} {kind} by attempt {attempt}, opened"
                                 " before a later resume boundary"))
        if kind == "run_started":
            starts += 1
            if payload.get("startAt"):
                entries[str(payload["startAt"])] += 1
        elif kind == "run_resumed" and payload.get("boundary") is True:
            for old in seen - superseded:
                boundary_at[old] = int(event.get("at") or 0)
            superseded |= seen
        elif kind == "node_started" and attempt:
            seen.add(str(attempt))
        elif kind in ENDS:
            ends[str(event.get("nodeId"))] += 1
            ended_attempts[str(attempt)] += 1
            if payload.get("next"):
                entries[str(payload["next"])] += 1
        elif kind in MOUNT_PASSES and payload.get("next"):
            entries[str(payload["next"])] += 1
        if kind in FINAL_EVENTS:
            finished = f"{kind} (seq {event.get('seq')})"
    if starts > 1:
        out.append(Violation("activated_twice", run.run_id, f"{starts} run_started events"))
    for node, count in sorted(ends.items()):
        if count > entries[node]:
            out.append(Violation("node_finished_twice", run.run_id,
                                 f"node {node} ended {count} times, routed to {entries[node]}"))
    for attempt, count in sorted(ended_attempts.items()):
        if count > 1:
            out.append(Violation("node_finished_twice", run.run_id,
                                 f"attempt {attempt} ended {count} times"))
    for effect in run.effects:  # the store's side: a settle by a superseded attempt
        settler = effect.get("attemptId")
        if settler in boundary_at and effect.get("state") in ("applied", "rejected") \
                and int(effect.get("updatedAt") or 0) > boundary_at[settler]:
            out.append(Violation("stale_write", run.run_id,
                                 f"effect {effect.get('nodeId')}/{effect.get('effectKey')}"
                                 f" settled {effect.get('state')} by attempt {settler} after the"
                                 " run was resumed"))


def _agent_steps(events: list[dict[str, Any]]) -> tuple[Counter[str], dict[str, list[str]]]:
    """How often each node was entered, and the attempts that finished each agent node
    (a node with an ``agent_prompt_sent``), in trace order."""
    entries: Counter[str] = Counter()
    agents: set[str] = set()
    finished: dict[str, list[str]] = {}
    for event in events:
        kind, payload = event.get("type"), event.get("payload") or {}
        if kind == "run_started" and payload.get("startAt"):
            entries[str(payload["startAt"])] += 1
        elif kind in (*ENDS, *MOUNT_PASSES) and payload.get("next"):
            entries[str(payload["next"])] += 1
        if kind == "agent_prompt_sent":
            agents.add(str(event.get("nodeId")))
        if kind == "node_finished":
            finished.setdefault(str(event.get("nodeId")), []).append(str(event.get("attemptId")))
    return entries, {node: finished.get(node, []) for node in sorted(agents)}


def check_agent_steps(run: RunFacts, events: list[dict[str, Any]], out: Found) -> None:
    """An agent step's result is accepted once per entry of its node, whichever attempt
    (in the session or headless) handed it in."""
    entries, finished = _agent_steps(events)
    for node, attempts in finished.items():
        if len(attempts) > max(entries[node], 1):
            out.append(Violation("step_accepted_twice", run.run_id,
                                 f"agent step {node} finished {len(attempts)} times (attempts"
                                 f" {', '.join(attempts)}), entered {entries[node]}"))


def check_conversations(durable: Durable, events: dict[str, list[dict[str, Any]]],
                        out: Found) -> None:
    """In the Pi sessions of in-session runs: each attempt's submit accepted at most once,
    none accepted while its node was finished by another attempt, and each deferred
    turn (a follow-up's intent id) delivered once per session."""
    accepted: Counter[str] = Counter()
    steps: dict[str, dict[str, Any]] = {}
    for talk in durable.conversations:
        accepted.update(talk["accepted"])
        steps.update(talk["steps"])
        for intent, count in sorted(Counter(talk["followUps"]).items()):
            if count > 1:
                out.append(Violation("turn_sent_twice", talk["followUpRuns"].get(intent),
                                     f"deferred turn {intent} in session file {talk['file']}"
                                     f" {count} times"))
    for attempt, count in sorted(accepted.items()):
        step = steps.get(attempt) or {}
        run_id = step.get("runId")
        if count > 1:
            out.append(Violation("step_accepted_twice", run_id,
                                 f"attempt {attempt}'s submit accepted {count} times in the"
                                 " session"))
        if run_id not in events:
            continue
        entries, finished = _agent_steps(events[str(run_id)])
        node = str(step.get("step"))
        others = [a for a in finished.get(node, []) if a != attempt]
        if attempt not in finished.get(node, []) and others and \
                len(others) >= max(entries[node], 1):
            out.append(Violation("step_accepted_twice", run_id,
                                 f"agent step {node}: attempt {attempt} accepted in the"
                                 f" session, then the node finished by {', '.join(others)}"))


def check_activations(run: RunFacts, out: Found) -> None:
    """A launch from ``queued`` reaches ``running`` once (requeues and resumes aside)."""
    activations, pending = 0, False
    for event in run.feed:
        kind, origin = str(event["type"]), (event.get("payload") or {}).get("from")
        if kind == Q.STARTING:
            pending = origin == Q.QUEUED
        elif kind == Q.QUEUED:
            pending = False
        elif kind == Q.RUNNING and pending:
            activations += 1
            pending = False
    if activations > 1:
        out.append(Violation("activated_twice", run.run_id,
                             f"{activations} activations from queued to running in the feed"))


def check_settled(run: RunFacts, out: Found) -> None:
    """After settling: every run ended, and its queue row says what its bundle says."""
    row = run.row
    if row is None:
        if run.state is not None and run.state.get("forkedFrom") is None:
            out.append(Violation("run_lost", run.run_id, "a bundle without a queue row"))
        return
    if row["state"] not in TERMINAL:
        out.append(Violation("run_stuck", run.run_id, f"queue state {row['state']} after"
                             " settling"))
        return
    status = run.state.get("status") if run.state is not None else None
    if status is None:
        if row["state"] == Q.DONE or (row.get("startedAt") and run.trace is None):
            out.append(Violation("run_lost", run.run_id,
                                 f"queue {row['state']} (started) but no readable bundle"))
        return
    message = str(row.get("errorMessage") or "")
    if row["state"] == Q.FAILED and (row.get("errorCode") == "disk_full"
                                     or any(w in message for w in DISK_FULL_WORDS)):
        out.append(Violation("disk_full_mishandled", run.run_id,
                             f"failed ({row.get('errorCode')}) because its disk was full:"
                             f" {message[:160]!r}"))
        return
    if QUEUE_FOR_STATUS.get(str(status)) != row["state"]:
        out.append(Violation("queue_bundle_mismatch", run.run_id,
                             f"queue {row['state']}, bundle {status}"))
    elif row["state"] == Q.FAILED and row.get("errorCode") not in EXPECTED_FAILURES \
            and not (row.get("errorCode") == "interrupted"
                     and row.get("workflow") == CONTROLLER_CHILD):
        out.append(Violation("unexpected_failure", run.run_id,
                             f"failed with {row.get('errorCode')!r}, which no fault explains"))


def check_ledger(durable: Durable, out: Found) -> None:
    """Each guarded effect ran at most once, and every applied one left its line."""
    lines = Counter(durable.ledger)
    for line, count in sorted(lines.items()):
        if count > 1:
            out.append(Violation("effect_applied_twice", line.split(" ")[0],
                                 f"ledger line {line!r} {count} times"))
    def per_node(ledger: list[str]) -> Counter[str]:
        return Counter(" ".join(line.split(" ")[:2]) for line in ledger)

    before = per_node(durable.ledger if durable.ledger_before is None
                      else durable.ledger_before)
    after = per_node(durable.ledger)
    for run in durable.runs.values():
        for node in sorted({e["nodeId"] for e in run.effects}):
            mine = [e for e in run.effects if e["nodeId"] == node]
            applied = sum(e["state"] == "applied" for e in mine)
            ran, now = before.get(f"{run.run_id} {node}", 0), after.get(f"{run.run_id} {node}", 0)
            if ran > len(mine):
                out.append(Violation("effect_applied_twice", run.run_id,
                                     f"node {node}: {ran} ledger lines, {len(mine)} effect"
                                     " record(s)"))
            elif now < applied:
                out.append(Violation("effect_missing", run.run_id,
                                     f"node {node}: {applied} applied effect(s), {now} ledger"
                                     " line(s)"))


def check_deliveries(durable: Durable, out: Found) -> None:
    seen: Counter[tuple[str, str, str]] = Counter()
    runs: dict[tuple[str, str, str], str] = {}
    for entry in durable.deliveries:
        for what in ("notification", "intent"):
            if entry.get(what) is not None:
                key = (str(entry.get("session")), what, str(entry[what]))
                seen[key] += 1
                runs[key] = str(entry.get("runId"))
    for key, count in sorted(seen.items()):
        if count > 1:
            out.append(Violation("delivered_twice", runs[key],
                                 f"{key[1]} {key[2]} delivered to session {key[0]} {count}"
                                 " times"))


def check_follow_ups(durable: Durable, out: Found) -> None:
    """After the final sync of every session: each launch that failed before it ran
    has its follow-up recorded, and no follow-up is left undelivered."""
    recorded = {i["runId"] for i in durable.intents}
    for run in durable.runs.values():
        row = run.row or {}
        if row.get("originSession") and row.get("state") == Q.FAILED \
                and row.get("startedAt") is None and run.run_id not in recorded:
            out.append(Violation("follow_up_lost", run.run_id,
                                 f"launch failed ({row.get('errorCode')}) with no turn intent"
                                 f" for session {row['originSession']}"))
    for intent in durable.intents:
        if intent["state"] != "resolved":
            out.append(Violation("follow_up_lost", intent["runId"],
                                 f"turn intent {intent['intentId']} for session"
                                 f" {intent['sessionId']} is still {intent['state']}"))


def check_watermarks(durable: Durable, before: dict[str, int], out: Found) -> None:
    for session, seq in sorted(durable.watermarks.items()):
        if seq < before.get(session, 0):
            out.append(Violation("watermark_backwards", None,
                                 f"session {session}: watermark {before[session]} -> {seq}"))


# Outcome events of a reconcile that wrote its status: their ``resourceVersion`` is
# the resource's version right after the write.
STATUS_WRITES = ("settled", "requeue", "requeue_after")
Marks = dict[str, tuple[int, int]]  # resource uid -> (observed_generation, resource_version)


def check_reconcile_effects(durable: Durable, out: Found) -> None:
    """No applied reconcile effect twice: no ledger line (``ledger KEY EFFECT UID``)
    twice, no two applied records of one kind (the effect key's first word) for one
    generation, and every applied record of a resource left its line."""
    lines = Counter(durable.ctl_ledger)
    for line, count in sorted(lines.items()):
        if count > 1:
            out.append(Violation("effect_repeated", None, f"ledger line {line!r} {count} times"))
    records: Counter[tuple[str, str, str, int]] = Counter()
    for effect in durable.ctl_effects:
        if effect["state"] == "applied":
            what = str(effect["effectKey"]).split("-", 1)[0]
            records[(effect["controller"], effect["key"], what, int(effect["generation"]))] += 1
    for (controller, key, what, gen), count in sorted(records.items()):
        if count > 1:
            out.append(Violation("effect_repeated", None, f"{controller}/{key}: {count} applied"
                                 f" {what} effect records for generation {gen}"))
    uids = {(r["controller"], r["key"]): str(r["uid"]) for r in durable.resources}
    for effect in durable.ctl_effects:
        owner = uids.get((effect["controller"], effect["key"]))
        line = f"{effect['controller']} {effect['key']} {effect['effectKey']} {owner}"
        if effect["state"] == "applied" and owner is not None and line not in lines:
            out.append(Violation("effect_missing", None,
                                 f"{effect['controller']}/{effect['key']}: effect"
                                 f" {effect['effectKey']} applied, no ledger line {line!r}"))


def check_statuses(durable: Durable, marks: Marks, out: Found) -> None:
    """No status write the store accepted is lost: a resource's observed generation and
    version never go back, it never observes a generation it does not have, and it is at
    least as new as its last reconcile's status write."""
    for res in durable.resources:
        name, status = f"{res['controller']}/{res['key']}", res["status"] or {}
        observed, version = int(status.get("observed_generation") or 0), res["resourceVersion"]
        was_observed, was_version = marks.get(res["uid"], (0, 0))
        if observed < was_observed or version < was_version:
            out.append(Violation("status_lost", None,
                                 f"{name} ({res['uid']}): observed generation {was_observed}"
                                 f" -> {observed}, resource version {was_version} -> {version}"))
        if observed > res["generation"]:
            out.append(Violation("status_lost", None, f"{name}: observes generation {observed}"
                                 f" of {res['generation']}"))
        writes = [e for e in res["events"] if e["uid"] == res["uid"]
                  and (e.get("data") or {}).get("outcome") in STATUS_WRITES]
        if writes and int(writes[-1]["data"].get("resourceVersion") or 0) > version:
            out.append(Violation("status_lost", None,
                                 f"{name}: its last {writes[-1]['type']} event wrote version"
                                 f" {writes[-1]['data']['resourceVersion']}, the resource is"
                                 f" at {version}"))


def check_resources_settled(durable: Durable, out: Found) -> None:
    """After settling: every resource observed its spec's generation and is Ready, and
    every one marked for deletion is gone."""
    for res in durable.resources:
        name, status = f"{res['controller']}/{res['key']}", res["status"] or {}
        ready: dict[str, Any] = next((c for c in status.get("conditions") or []
                                      if c.get("type") == "Ready"), {})
        if res["deletionRequested"]:
            out.append(Violation("resource_stuck", None, f"{name}: deletion requested, still"
                                 f" there (finalizers {res['finalizers']})"))
        elif int(status.get("observed_generation") or 0) != res["generation"]:
            out.append(Violation("resource_stuck", None,
                                 f"{name}: generation {res['generation']}, observed"
                                 f" {status.get('observed_generation')} (Ready"
                                 f" {ready.get('status')} {ready.get('reason')})"))
        elif ready.get("status") != "true":
            out.append(Violation("resource_stuck", None, f"{name}: Ready {ready.get('status')}"
                                 f" {ready.get('reason')} {ready.get('message')!r}"))


def resource_marks(durable: Durable, marks: Marks) -> Marks:
    """``marks`` moved on to what ``durable`` shows (for the next check)."""
    out = dict(marks)
    for res in durable.resources:
        observed = int((res["status"] or {}).get("observed_generation") or 0)
        old = out.get(res["uid"], (0, 0))
        out[res["uid"]] = (max(old[0], observed), max(old[1], res["resourceVersion"]))
    return out


def check(durable: Durable, *, final: bool, watermarks: dict[str, int] | None = None,
          skip: Callable[[str], bool] = lambda _: False, marks: Marks | None = None) -> Found:
    """Every violation in ``durable``; ``watermarks``: each session's last seen mark;
    ``marks``: each resource's last seen observed generation and version."""
    out: Found = []
    traces: dict[str, list[dict[str, Any]]] = {}
    for run in durable.runs.values():
        if skip(run.run_id):
            continue
        events = traces[run.run_id] = check_trace(run, final, out)
        check_history(run, events, out)
        check_agent_steps(run, events, out)
        check_activations(run, out)
        if final:
            check_settled(run, out)
    if final:
        for run_id in sorted(set(durable.launched) - set(durable.runs)):
            out.append(Violation("run_lost", run_id, "acknowledged to the drill, no queue row"
                                 " and no bundle"))
        check_follow_ups(durable, out)
        for proc in durable.marked:
            out.append(Violation("leftover_process", None,
                                 f"pid {proc['pid']} ({proc['cmd']}) marker {proc['marker']}"))
        for line in durable.disk_full_noise[:20]:
            out.append(Violation("disk_full_mishandled", None,
                                 f"a full disk shown as a raw error: {line}"))
    for host in durable.host_exits:  # whatever made it exit, it must not have
        out.append(Violation("host_exited", None,
                             f"host {host['pid']} exited {host['code']} without being stopped"))
    check_ledger(durable, out)
    check_reconcile_effects(durable, out)
    check_statuses(durable, marks or {}, out)
    if final:
        check_resources_settled(durable, out)
    check_deliveries(durable, out)
    check_conversations(durable, traces, out)
    check_watermarks(durable, watermarks or {}, out)
    for entry in durable.loose:
        out.append(Violation("loose_permissions", None,
                             f"{entry['kind']} {entry['path']} is {entry['mode']}"))
    return out
