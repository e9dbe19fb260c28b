"""Agent bench (issue 9): agent steps in the real pinned Pi against the scripted model.

No network: every Pi here talks to ``e2e.scripted_model.ScriptedModel`` on
127.0.0.1 through an isolated agent directory (``e2e.pi_env.make_pi_env``);
nothing reads or writes ``~/.pi``. The model's script finds the step and
attempt ids in the step contract of the newest user message and submits
``{"ok": true}`` through the ``workflow`` tool at once; a prompt without a
contract gets a plain text reply.

1. Pi cold start vs warmed, as an agent node sees it, in-process:
   ``PiExecutor.run`` with no Pi yet (cold), or after ``warm()`` and Pi
   answering ``get_state`` (warm: the bench sends it through the executor's
   private ``_pi`` before the node starts, so no fixed settle wait). The
   milestones, ms after ``run()`` is called: the ``prompt_sent`` hook (just
   before the prompt is written), the prompt accepted (Pi's ``response`` to
   it), the scripted server receiving the model request, the first token (the
   first text delta or tool-call event), the submission reaching the worker
   (the hooks' ``check``), and ``run()`` returning. Pi's events are timed by a
   capture stand-in (the executor hands every event to its capture). Cold and
   warm samples alternate, each with a fresh executor, Pi and session file.
2. The same through the real CLI: ``pi-workflows run`` of a one-agent-node
   workflow (``warm()`` races the node, so Pi is cold) and of a compute node
   that sleeps ``--settle`` seconds before the agent node (Pi warmed while it
   runs; a warning says so when Pi's start-up in [1] took longer). The agent
   node's ``node_started`` -> ``agent_prompt_sent`` -> ``node_finished`` from
   the bundle trace ``at`` fields, the capture's ``tool_start``
   (``session/events.ndjson``), ``run_started`` -> ``run_completed``, and the
   CLI's wall time. The bundle does not record
   Pi's acceptance of the prompt.
3. Per-step overhead of the bridge over a bare Pi round trip, Pi warm and
   reused for every step (one conversation that grows, as in a run): a bare
   ``pi --mode rpc`` (``e2e.pi_env.PiRpc``, ``--no-session``) prompt ->
   ``agent_end`` with a plain text reply; the same bare Pi with a session file
   (what the executor's Pi also writes); and an agent step through one
   ``PiExecutor`` whose model submits through the ``workflow`` tool. One
   untimed step first on each Pi, then one step on each in turn, ``--gap``
   seconds apart, so a load swing on the machine hits all three alike.
4. Memory (psutil): the CLI's worker and its Pi while an agent step is in
   progress (the model's reply stalls mid-stream; once released it ends
   without a submission, and the executor's reminder gets one), and a bare
   idle Pi.

Figures only; nothing is asserted. Every wait has a deadline (``--timeout``)
and a timed-out wait is printed, not raised. Every Pi, executor, CLI process
and project started here is stopped at the end, by pid.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from pi_workflows.protocol.states import Outcome
from pi_workflows.worker.agent import AgentRequest, AgentResult, with_contract
from pi_workflows.worker.pi_executor import ABORT_WAIT_S, PiExecutor, PiSettings

from e2e.harness import HarnessError, Project, alive, clean_env, poll
from e2e.pi_env import PiEnv, PiError, PiRpc, make_pi_env, pi_binary, pinned_pi_version
from e2e.scripted_model import Request, ScriptedModel, Stall, Text, ToolCalls, call

from .host_common import MB, comma_words, finish_bench, load_average, pct, rss_uss, summary

# The step contract's submit line ({"action": "submit", "step": "S", "attempt": "A", ...)
# or the executor's reminder ("... action `submit`, step `S`, attempt `A` ...").
CONTRACT = re.compile(r'"action": "submit", "step": "([^"]+)", "attempt": "([^"]+)"'
                      r"|action `submit`, step `([^`]+)`, attempt `([^`]+)`")
TOKEN_EVENTS = frozenset({"text_delta", "toolcall_start", "toolcall_delta", "toolcall_end"})
GOAL_MS = 150.0  # issue 9: first prompt accepted this soon after the node starts, Pi warmed
PROMPT = "Reply with ok."

ONE_AGENT = """
from pi_workflows import agent, define_workflow

workflow = define_workflow(start_at="agent", nodes=[agent("agent", "Reply with ok.")], edges=[])
"""

SETTLE_THEN_AGENT = """
import time

from pi_workflows import agent, compute, define_workflow, edge


def settle(ctx):
    time.sleep({settle})  # Pi is warmed while this runs
    return {{}}


workflow = define_workflow(
    start_at="settle",
    nodes=[compute("settle", settle), agent("agent", "Reply with ok.")],
    edges=[edge("settle", "agent")],
)
"""


# ---- the scripted model ----------------------------------------------------------


class Script:
    """Submit at once for a prompt with a step contract, text otherwise; a stall on request."""

    def __init__(self) -> None:
        self.stall: Stall | None = None  # answers the next contract request, once
        self._lock = threading.Lock()

    def __call__(self, request: Request) -> Any:
        users = request.texts("user")
        found = CONTRACT.search(users[-1]) if users else None
        if found is None:
            return Text("ok")
        with self._lock:
            stall, self.stall = self.stall, None
        if stall is not None:
            return stall
        step, attempt = (found[1], found[2]) if found[1] else (found[3], found[4])
        return ToolCalls(call("workflow", {"action": "submit", "step": step,
                                           "attempt": attempt, "output": {"ok": True}}))


# ---- driving PiExecutor in-process -----------------------------------------------


@dataclass
class Marks:
    """One agent step's milestones (time.monotonic()), first occurrence each; also the
    ``AgentHooks`` (check accepts anything) and the capture the executor feeds events."""

    t: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def mark(self, name: str, at: float | None = None) -> None:
        with self.lock:
            self.t.setdefault(name, time.monotonic() if at is None else at)

    # AgentHooks
    def prompt_sent(self, prompt: str) -> None:
        self.mark("prompt_sent")

    def update(self, message: str) -> None:
        self.mark("update")

    def check(self, submission: Any) -> str | None:
        self.mark("submitted")
        return None

    # what PiExecutor asks of its capture
    def event(self, request: AgentRequest, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "response" and event.get("command") == "prompt":
            self.mark("accepted" if event.get("success") else "refused")
        elif kind == "message_update":
            if (event.get("assistantMessageEvent") or {}).get("type") in TOKEN_EVENTS:
                self.mark("first_token")
        elif kind == "agent_end":
            self.mark("agent_end")

    def tick(self, request: AgentRequest) -> None:
        pass  # the capture's timer for text paused mid-reply: nothing to time here

    def flush(self) -> None:
        pass

    def since(self, start: str, end: str) -> float | None:
        a, b = self.t.get(start), self.t.get(end)
        return None if a is None or b is None else (b - a) * 1000


@dataclass
class Bench:
    """What every phase shares: the model, the Pi environment, the places to clean."""

    base: Path
    model: ScriptedModel
    script: Script
    pi_env: PiEnv
    binary: Path
    timeout: float
    executors: list[PiExecutor] = field(default_factory=list)
    pi_pids: list[int] = field(default_factory=list)  # every Pi an executor here started
    projects: list[Project] = field(default_factory=list)
    sessions: int = 0

    def executor(self) -> PiExecutor:
        self.sessions += 1
        session_dir = self.base / "sessions" / f"s{self.sessions}"
        session_dir.mkdir(parents=True)
        ex = PiExecutor(PiSettings(str(self.binary), (), str(self.pi_env.agent_dir), 0),
                        project_dir=self.pi_env.cwd, session_dir=session_dir,
                        record_process=self.pi_pids.append, capture=None)
        self.executors.append(ex)
        return ex

    def close_executor(self, ex: PiExecutor) -> None:
        ex.close()
        with contextlib.suppress(ValueError):
            self.executors.remove(ex)

    def model_request_at(self, after: int) -> float | None:
        """When the server received the first completion request with index >= ``after``."""
        return next((r.received_at for r in self.model.completions if r.index >= after), None)


def request_for(step: str, attempt: str) -> AgentRequest:
    return AgentRequest("bench-run", step, attempt,
                        with_contract(PROMPT, None, workflow="bench", step=step, attempt=attempt),
                        None, None)


def wait_warm(ex: PiExecutor, timeout: float) -> float | None:
    """After ``warm()``: until the executor's Pi answers ``get_state``; None on a timeout.

    Reads the executor's private ``_pi`` (no node is running, so nothing else takes
    its events).
    """
    deadline = time.monotonic() + timeout
    pi = poll(lambda: ex._pi, timeout, 0.002)
    if pi is None:
        return None
    cid = pi.send({"type": "get_state"})
    while (left := deadline - time.monotonic()) > 0:
        with contextlib.suppress(Exception):
            event = pi.events.get(timeout=left)
            if event is None:
                return None  # Pi exited
            if event.get("type") == "response" and event.get("id") == cid:
                return time.monotonic()
    return None


def run_step(bench: Bench, ex: PiExecutor, step: str, attempt: str
             ) -> tuple[Marks, AgentResult | None]:
    """One ``PiExecutor.run`` with a deadline (abort, then give up, on a timeout)."""
    marks, stop = Marks(), threading.Event()
    ex.capture = marks  # type: ignore[assignment]  # the executor only calls event/flush
    box: list[AgentResult] = []
    before = len(bench.model.requests)
    request = request_for(step, attempt)

    def go() -> None:
        box.append(ex.run(request, marks, stop))
        marks.mark("returned")

    thread = threading.Thread(target=go, daemon=True, name="bench-agent-step")
    marks.mark("start")
    thread.start()
    thread.join(bench.timeout)
    if thread.is_alive():
        stop.set()  # the executor aborts the turn, then restarts Pi after ABORT_WAIT_S
        thread.join(ABORT_WAIT_S + 5)
        print(f"    ! step {step}: no result after {bench.timeout:g} s; aborted"
              f" ({'ended' if not thread.is_alive() else 'still running'})")
    if (at := bench.model_request_at(before)) is not None:
        marks.mark("model_request", at)
    return marks, (box[0] if box else None)


def startup(bench: Bench, samples: int) -> dict[str, Any]:
    """Cold and warm first steps, alternating, each on a fresh executor and Pi."""
    out: dict[str, Any] = {"cold": [], "warm": [], "ready": [], "failed": []}
    for i in range(samples):
        for mode in ("cold", "warm"):
            ex = bench.executor()
            try:
                if mode == "warm":
                    began = time.monotonic()
                    ex.warm()
                    ready = wait_warm(ex, bench.timeout)
                    if ready is None:
                        out["failed"].append(f"{mode} #{i}: Pi did not answer get_state")
                        continue
                    out["ready"].append((ready - began) * 1000)
                marks, result = run_step(bench, ex, "agent", f"agent-{i + 1}-{mode}")
                if result is None or result.outcome != Outcome.OK:
                    out["failed"].append(f"{mode} #{i}: {result}")
                out[mode].append(marks)
            finally:
                bench.close_executor(ex)
    return out


MILESTONES = (("prompt_sent", "prompt_sent hook (just before the prompt is written)"),
              ("accepted", "prompt accepted by Pi"),
              ("model_request", "model request reaches the server"),
              ("first_token", "first token (text delta / tool-call event)"),
              ("submitted", "submission reaches the worker (check)"),
              ("returned", "run() returns: step accepted"))


def spans(marks: list[Marks], start: str, end: str) -> list[float]:
    return [v for m in marks if (v := m.since(start, end)) is not None]


def print_startup(r: dict[str, Any]) -> None:
    for mode in ("cold", "warm"):
        marks: list[Marks] = r[mode]
        what = ("no Pi yet: run() starts it" if mode == "cold"
                else "after warm() and Pi answering get_state")
        print(f"  {mode} ({what}), ms after run() is called:")
        for key, label in MILESTONES:
            print(f"    {label:<52} {summary(spans(marks, 'start', key))}")
    print(f"  warm(): start -> Pi answers get_state (Pi's own start-up)"
          f"   {summary(r['ready'])}")
    for line in r["failed"]:
        print(f"    ! {line}")
    warm, cold = spans(r["warm"], "start", "accepted"), spans(r["cold"], "start", "accepted")
    if warm and cold:
        worst = pct(warm, 0.99)
        verdict = (f"met with {GOAL_MS - worst:.0f} ms to spare" if worst <= GOAL_MS
                   else f"missed by {worst - GOAL_MS:.0f} ms")
        print(f"  goal (issue 9): prompt accepted within {GOAL_MS:.0f} ms of the node starting"
              f" with Pi warmed, against ~1.1 s cold:\n    warm p50 {pct(warm, 0.5):.1f} ms,"
              f" p99 {worst:.1f} ms: {verdict}; cold p50 {pct(cold, 0.5):.0f} ms"
              f" ({pct(cold, 0.5) / max(pct(warm, 0.5), 0.01):.0f}x the warm p50)")
        ft_w, ft_c = spans(r["warm"], "start", "first_token"), spans(r["cold"], "start",
                                                                     "first_token")
        if ft_w and ft_c:
            print(f"    first token: warm p50 {pct(ft_w, 0.5):.0f} ms, cold p50"
                  f" {pct(ft_c, 0.5):.0f} ms")


# ---- per-step overhead -------------------------------------------------------------


def bare_step(bench: Bench, pi: PiRpc) -> Marks:
    """prompt -> agent_end on a bare Pi (plain text reply), events timed as they are read."""
    marks = Marks()
    before = len(bench.model.requests)
    marks.mark("start")
    # No id: PiRpc keeps an id-less response with the events, in order, to be timed here.
    pi.send({"type": "prompt", "message": PROMPT})
    deadline = time.monotonic() + bench.timeout
    while (left := deadline - time.monotonic()) > 0:
        event = pi.next_event(left)  # raises PiError on a timeout or an exit
        kind = event.get("type")
        if kind == "response" and event.get("command") == "prompt":
            marks.mark("accepted")
        elif kind == "message_update" and (
                (event.get("assistantMessageEvent") or {}).get("type") in TOKEN_EVENTS):
            marks.mark("first_token")
        elif kind == "agent_end":
            marks.mark("returned")
            break
    if (at := bench.model_request_at(before)) is not None:
        marks.mark("model_request", at)
    return marks


def bare_pi(bench: Bench, session: bool) -> PiRpc:
    root = bench.base / ("bare-session" if session else "bare")
    env = make_pi_env(root, bench.model.base_url, model_id=bench.model.model_id)
    extra = ("--session", str(root / "pi-session.jsonl")) if session else ()
    return PiRpc(env, *extra, session=session, binary=bench.binary)


def overhead(bench: Bench, steps: int, gap: float) -> dict[str, Any]:
    """Three warm Pis, one untimed step each, then ``steps`` rounds of one step on each
    in turn (so a load swing on the machine hits all three alike), ``gap`` seconds before
    each; the idle bare Pi's RSS."""
    out: dict[str, Any] = {"bare": [], "session": [], "bridged": [], "idle": None}
    with contextlib.ExitStack() as stack:
        ex = bench.executor()
        stack.callback(bench.close_executor, ex)
        ex.warm()
        pis = {"bare": stack.enter_context(bare_pi(bench, False)),
               "session": stack.enter_context(bare_pi(bench, True))}
        try:
            for pi in pis.values():
                pi.wait_ready(bench.timeout)
            if wait_warm(ex, bench.timeout) is None:
                print("    ! the executor's Pi did not answer get_state")
                return out
            time.sleep(0.5)  # let start-up work that follows the first answer finish
            sample = rss_uss(psutil.Process(pis["bare"].pid))
            out["idle"] = sample[0] if sample else None
            for pi in pis.values():
                bare_step(bench, pi)  # untimed: the first request's one-off costs
            run_step(bench, ex, "s0", "s0-1-warmup")
            for i in range(1, steps + 1):
                for name, pi in pis.items():
                    time.sleep(gap)  # what a step leaves Pi doing does not hit the next
                    out[name].append(bare_step(bench, pi))
                time.sleep(gap)
                marks, result = run_step(bench, ex, f"s{i}", f"s{i}-1-bench")
                if result is not None and result.outcome == Outcome.OK:
                    out["bridged"].append(marks)
                else:
                    print(f"    ! step s{i}: {result}")
        except PiError as exc:
            print(f"    ! bare Pi: {str(exc)[:300]}")
    return out


SPLIT_NAMES = {"start": "send", "accepted": "prompt accepted",
               "model_request": "model request at the server", "first_token": "first token",
               "submitted": "submission at the worker", "returned": "agent_end / run() returns"}


def split_rows(marks: list[Marks], skip: tuple[str, ...] = ()) -> list[tuple[str, list[float]]]:
    """Consecutive milestones that every step has (but ``skip``), as (label, ms) rows."""
    keys = [k for k in SPLIT_NAMES
            if k not in skip and marks and all(k in m.t for m in marks)]
    return [(f"{SPLIT_NAMES[a]} -> {SPLIT_NAMES[b]}", spans(marks, a, b))
            for a, b in itertools.pairwise(keys)]


def print_overhead(r: dict[str, Any]) -> None:
    bare, bridged = r["bare"], r["bridged"]
    # The scripted reply arrives in one burst, so in the executor the first token and
    # the submission reach the worker within a GIL switch of each other (either first):
    # its split goes straight from the model request to the submission.
    rows = (("bare Pi, text reply (--no-session)", bare, ()),
            ("bare Pi, text reply, with a session file", r["session"], ()),
            ("PiExecutor step, submit through the workflow tool", bridged, ("first_token",)))
    for label, marks, skip in rows:
        print(f"  {label}:\n    prompt -> agent_end / step done     "
              f"{summary(spans(marks, 'start', 'returned'), digits=1)}")
        for what, values in split_rows(marks, skip):
            print(f"      {what:<50} {summary(values, digits=1)}")
    base, step = spans(bare, "start", "returned"), spans(bridged, "start", "returned")
    if base and step:
        print(f"  bridge overhead per step over the bare round trip: p50"
              f" {pct(step, 0.5) - pct(base, 0.5):+.1f} ms, p99"
              f" {pct(step, 0.99) - pct(base, 0.99):+.1f} ms")


# ---- through the CLI ---------------------------------------------------------------


def cli_project(bench: Bench, name: str) -> Project:
    root = bench.base / name
    root.mkdir(parents=True)
    project = Project(root, clean_env(bench.base / "home",
                                      PI_WORKFLOWS_PI_BIN=str(bench.binary),
                                      PI_WORKFLOWS_PI_AGENT_DIR=str(bench.pi_env.agent_dir)))
    bench.projects.append(project)
    project.write_workflow("one", ONE_AGENT)
    return project


def _event_at(events: list[dict[str, Any]], kind: str, node: str | None = None) -> int | None:
    return next((int(e["at"]) for e in events
                 if e["type"] == kind and (node is None or e.get("nodeId") == node)), None)


def capture_at(project: Project, run_id: str, kind: str) -> int | None:
    path = project.paths.runs_dir / run_id / "session" / "events.ndjson"
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if record.get("kind") == kind:
                    return int(record["at"])
    return None


def cli_runs(bench: Bench, workflow: str, body: str, samples: int) -> dict[str, list[float]]:
    project = cli_project(bench, f"cli-{workflow}")
    project.write_workflow(workflow, body)
    out: dict[str, list[float]] = {k: [] for k in (
        "wall", "run", "node", "prompt_sent", "tool_start", "pi_recorded", "failed")}
    for _ in range(samples):
        began = time.monotonic()
        try:
            proc = project.cli("run", workflow, "--json", check=False, timeout=bench.timeout)
        except subprocess.TimeoutExpired:
            print(f"    ! {workflow}: `pi-workflows run` took over {bench.timeout:g} s")
            out["failed"].append(1)
            project.cleanup()
            continue
        wall = (time.monotonic() - began) * 1000
        try:
            result = json.loads(proc.stdout)
        except ValueError:
            result = {}
        run_id = result.get("runId")
        if proc.returncode != 0 or result.get("runStatus") != "completed" or not run_id:
            print(f"    ! {workflow}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
            out["failed"].append(1)
            continue
        events = project.events(run_id)
        node = _event_at(events, "node_started", "agent")
        marks = {"run_started": _event_at(events, "run_started"),
                 "run_completed": _event_at(events, "run_completed"),
                 "prompt_sent": _event_at(events, "agent_prompt_sent", "agent"),
                 "finished": _event_at(events, "node_finished", "agent"),
                 "tool_start": capture_at(project, run_id, "tool_start")}
        pis = [int(p["recordedAt"]) for p in project.state_processes(run_id)
               if p.get("role") == "pi"]
        out["wall"].append(wall)
        if marks["run_started"] and marks["run_completed"]:
            out["run"].append(marks["run_completed"] - marks["run_started"])
        if node is None:
            continue
        for key, mark in (("node", "finished"), ("prompt_sent", "prompt_sent"),
                          ("tool_start", "tool_start")):
            if (at := marks[mark]) is not None:
                out[key].append(at - node)
        if pis:
            out["pi_recorded"].append(pis[0] - node)  # negative: Pi was up before the node
    return out


def print_cli(label: str, r: dict[str, list[float]]) -> None:
    print(f"  {label}:")
    print(f"    agent node_started -> agent_prompt_sent      {summary(r['prompt_sent'])}")
    print(f"    agent node_started -> capture tool_start     {summary(r['tool_start'])}")
    print(f"    agent node_started -> node_finished          {summary(r['node'])}")
    print(f"    Pi recorded in processes.json, vs node start {summary(r['pi_recorded'])}")
    print(f"    run_started -> run_completed (trace)         {summary(r['run'])}")
    print(f"    `pi-workflows run` wall time                 {summary(r['wall'])}")
    if r["failed"]:
        print(f"    ! {len(r['failed'])} run(s) did not complete")


# ---- memory ------------------------------------------------------------------------


def tree_rss(pid: int) -> tuple[int, int, int]:
    """(RSS of pid, USS of pid, RSS of its descendants)."""
    try:
        proc = psutil.Process(pid)
        own = rss_uss(proc) or (0, 0)
        kids = [rss_uss(k) for k in proc.children(recursive=True)]
    except psutil.Error:
        return 0, 0, 0
    return own[0], own[1], sum(k[0] for k in kids if k is not None)


def memory(bench: Bench) -> dict[str, Any]:
    """Worker + Pi of a `pi-workflows run` whose agent step stalls mid-reply."""
    project = cli_project(bench, "cli-memory")
    stall = Stall("Working on it", timeout=bench.timeout)
    bench.script.stall = stall
    out: dict[str, Any] = {}
    log = project.root / "cli-memory.log"
    with open(log, "wb") as sink:  # the child keeps its own descriptor
        proc = subprocess.Popen([sys.executable, "-m", "pi_workflows", "run", "one", "--json",
                                 "--project", str(project.root)], env=project.env,
                                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        if not poll(lambda: stall._reached.is_set() or proc.poll() is not None,
                    bench.timeout, 0.01) or not stall._reached.is_set():
            out["error"] = (f"the agent step did not reach the stalled reply (CLI exit"
                            f" {proc.poll()}): {log.read_text(errors='replace')[-300:]!r}")
            return out
        time.sleep(0.5)  # the streamed deltas are handled, the step is in progress
        runs = sorted(p.name for p in project.paths.runs_dir.glob("*") if p.is_dir())
        entries = project.state_processes(runs[0]) if runs else []
        for role in ("worker", "pi"):
            pids = [int(e["pid"]) for e in entries if e.get("role") == role]
            if pids:
                out[role] = tree_rss(pids[0])
        out["cli"] = tree_rss(proc.pid)[:2]
        stall.release()
        try:
            out["exit"] = proc.wait(bench.timeout)
        except subprocess.TimeoutExpired:
            out["exit"] = "timeout"
    finally:
        bench.script.stall = None
        stall.release()
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return out


def print_memory(r: dict[str, Any], bare_idle: int | None) -> None:
    if "error" in r:
        print(f"    ! {r['error']}")
    for role, label in (("worker", "worker (python)"), ("pi", "its Pi (node)")):
        if role in r:
            rss, uss, kids = r[role]
            extra = f", its children {kids / MB:.1f} MB" if kids else ""
            print(f"    {label:<18} RSS {rss / MB:6.1f} MB  USS {uss / MB:6.1f} MB{extra}")
    if "worker" in r and "pi" in r:
        print(f"    worker + Pi        RSS {(r['worker'][0] + r['pi'][0]) / MB:6.1f} MB")
    if "cli" in r:
        print(f"    (the attached `pi-workflows run` CLI itself: RSS {r['cli'][0] / MB:.1f} MB)")
    if bare_idle is not None:
        print(f"    Pi alone (bare, idle after start) RSS {bare_idle / MB:.1f} MB")
    if r.get("exit") not in (None, 0):
        print(f"    ! the stalled run's CLI ended with {r.get('exit')}")


# ---- the command line ----------------------------------------------------------------




def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench agent", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--startup-runs", type=int, default=8,
                        help="cold and warm in-process samples each (a fresh Pi per sample)")
    parser.add_argument("--cli-runs", type=int, default=4,
                        help="`pi-workflows run` runs per workflow")
    parser.add_argument("--settle", type=float, default=3.0,
                        help="seconds the compute node before the agent node sleeps (CLI, warm)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per Pi in [3]")
    parser.add_argument("--gap", type=float, default=0.1,
                        help="seconds of quiet before each step in [3]")
    parser.add_argument("--timeout", type=float, default=60.0, help="deadline of each wait (s)")
    parser.add_argument("--skip", type=comma_words, default=[],
                        help="phases to skip: startup,cli,overhead,memory")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    return parser.parse_args(argv)


@contextlib.contextmanager
def bench_setup(base: Path, timeout: float) -> Iterator[Bench]:
    script = Script()
    with ScriptedModel(script) as model:
        pi_env = make_pi_env(base / "pi", model.base_url, model_id=model.model_id)
        yield Bench(base, model, script, pi_env, pi_binary(), timeout)


def cleanup(bench: Bench) -> int:
    """Close every executor, kill any Pi they started that is alive, and the projects'
    marked processes; how many processes had to be killed."""
    killed = 0
    for ex in list(bench.executors):
        with contextlib.suppress(Exception):
            bench.close_executor(ex)
    for pid in bench.pi_pids:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            killed += 1
    for project in bench.projects:
        try:
            killed += project.cleanup()
        except Exception as exc:  # report, and go on cleaning the others
            print(f"  ! clean-up of {project.root}: {exc}")
    return killed


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    began = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="pi-wf-agent-bench-"))
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False)
    print(f"agent bench: python {sys.version.split()[0]}, node {node.stdout.strip() or '?'},"
          f" Pi {pinned_pi_version()}, {os.cpu_count()} CPU(s), load average {load_average()};"
          f" dir {base}; scripted model on 127.0.0.1 (nearest-rank percentiles;"
          " other work on the machine shows in the load average)")
    leftover = 0
    try:
        with bench_setup(base, args.timeout) as bench:
            try:
                pi_start: list[float] = []
                if "startup" not in args.skip:
                    print(f"\n[1] Pi cold vs warmed, PiExecutor.run in-process,"
                          f" {args.startup_runs} samples each, alternating")
                    started = startup(bench, args.startup_runs)
                    print_startup(started)
                    pi_start = started["ready"]
                if "cli" not in args.skip:
                    print(f"\n[2] through `pi-workflows run`, {args.cli_runs} runs each"
                          " (trace `at` fields, epoch ms)")
                    print_cli("one agent node (warm() races the node: Pi is cold)",
                              cli_runs(bench, "one", ONE_AGENT, args.cli_runs))
                    print_cli(f"compute node sleeping {args.settle:g} s, then the agent node"
                              " (Pi warmed meanwhile)",
                              cli_runs(bench, "settled", SETTLE_THEN_AGENT.format(
                                  settle=args.settle), args.cli_runs))
                    if pi_start and pct(pi_start, 0.99) > args.settle * 1000:
                        print(f"    ! Pi's start-up in [1] reached {pct(pi_start, 0.99):.0f} ms,"
                              f" longer than the {args.settle:g} s settle: some of these agent"
                              " nodes may have found Pi still starting (raise --settle)")
                bare_idle: int | None = None
                if "overhead" not in args.skip:
                    print(f"\n[3] per-step overhead, Pi warm and reused, {args.steps} timed"
                          " steps each after one untimed, the three Pis in turn,"
                          f" {args.gap:g} s apart")
                    steps = overhead(bench, args.steps, args.gap)
                    bare_idle = steps["idle"]
                    print_overhead(steps)
                if "memory" not in args.skip:
                    print("\n[4] memory (psutil) with an agent step in progress (the model's"
                          " reply stalls mid-stream), `pi-workflows run`")
                    print_memory(memory(bench), bare_idle)
                problems = [p for p in bench.model.problems if "stall ended" not in p]
                if problems:
                    print(f"\n  ! scripted model problems: {problems[:5]}")
            finally:
                leftover = cleanup(bench)
    except (HarnessError, PiError) as exc:
        print(f"  ! bench stopped: {str(exc)[:500]}")
    finally:
        finish_bench([], base, keep=args.keep, began=began, leftover=leftover)
    return 0

