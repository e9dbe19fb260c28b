"""Pi extension bench (issue 22): the real pinned Pi with the pi-workflows extension.

Owns the ``piext`` figures. One real ``pi --mode rpc -e <extension>``
(``node_modules/.bin/pi``, started the e2e way: ``e2e.pi_env`` and
``e2e.piext_kit``) on a persisted session in a bench project, against the
scripted model on 127.0.0.1 (no network, nothing under ``~/.pi``). Every
line of Pi's stdout is stamped (epoch ms) as the reader thread takes it.
``PI_WORKFLOWS_BIN`` is a small bash shim that logs each ``pi-workflows``
call the extension makes (its argv, its start and end from
``$EPOCHREALTIME``, no fork) and runs the real binary; a session runner
(``--park-on-eof``: ``activate`` or ``resume --session``) is ``exec``-ed, so
its pid, its lifeline and its signals stay the extension's, and only its
start is logged. The shim's own bash start-up (a few ms) is in every call.

1. End of the model's turn -> the model-started run's first node started:
   the ``agent_end`` of the turn whose model called the workflow tool's
   ``start`` (Pi's stdout) -> the run's first ``node_started`` (its bundle
   trace ``at``). The breakdown: ``agent_end`` -> the settle's ``status``
   call starts (the extension's idle wait), ``status``, the gap, ``sync``,
   the gap -> ``activate`` exec'd, ``activate`` start-up and claim (the
   store's ``starting`` event), claim -> the worker process started
   (``processes.json`` start time, 10 ms ticks), worker boot -> its entry
   recorded, -> ``run_started``, -> ``node_started`` (trace).
2. Host-driven change -> footer changed: the session's run parked (its
   session runner sent SIGTERM, Pi stays open) and then resumed by a host
   started for it, and a ``run NAME --session S`` started in another
   process; each sample is a store event's ``at`` (``running``, then
   ``done``) -> the first ``extension_ui_request`` ``setStatus`` after it
   that shows the new state. Each change comes after a random pause of up
   to 1.1 s: the bench waits on footers, which come at the end of the
   extension's polls, so unpaused changes would all land at one phase of
   its one-second poll.
3. A plain prompt -> the first token from the scripted model (a text delta
   on Pi's stdout), with the server's receipt of the request in between.
   Each scenario is a function ``(Rig, n) -> Figures``; the later "in-session
   step message -> first token" figure is one more such function in
   ``SCENARIOS``.
4. ``pi-workflows`` calls per turn: every call the extension starts from the
   prompt until 1.5 s after ``agent_end`` (the settle included), in an idle
   turn with no unfinished run, and in a turn while a run of the session is
   unfinished (held in a node); then the mean wall time per kind of call
   over the whole bench.

Figures only; nothing is asserted and a wait that runs out is printed, not
raised. At the end Pi, the host, the session runners and the project's
processes are stopped by pid and the temporary directory is removed.
Imports ``bench.host_common``, ``e2e.harness``, ``e2e.pi_env``,
``e2e.piext_kit``, ``e2e.scripted_model``, ``e2e.sessions_kit`` and
``pi_workflows.protocol``; never the supervisor's or the worker's internals
(the extension is driven only as Pi drives it).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import psutil
from pi_workflows.protocol.bundle import Bundle
from pi_workflows.protocol.states import TERMINAL
from pi_workflows.protocol.store import Store

from e2e.harness import HarnessError, HostProcess, Project, all_events, poll
from e2e.pi_env import PiError, PiRpc
from e2e.piext_kit import (
    BIN,
    activations,
    extension_path,
    kill_activations,
    pi_env_for,
    session_id,
    start,
)
from e2e.scripted_model import Reply, Request, ScriptedModel, Text, ToolCalls, call
from e2e.sessions_kit import FLOW, QUICK, query

from .host_common import PROJECTS, bench_project, finish_bench, load_average, pct, timelines

SETTLE_S = 1.5  # after agent_end, the turn's settle (status, sync, activate) is counted this long
GOALS = {"turn": 300.0, "footer": 2000.0}  # p50 goals, ms

SHIM = """#!/usr/bin/env bash
# The bench's PI_WORKFLOWS_BIN: log one line per call, then run the real binary.
t0=$EPOCHREALTIME
args="$*"; args=${{args//$'\\n'/ }}; args=${{args//$'\\t'/ }}
case " $* " in
  *" --park-on-eof "*)
    printf '%s\\t-\\t%s\\t-\\t%s\\n' "$t0" "$$" "$args" >> {log}
    exec {real} "$@" ;;
esac
{real} "$@"
rc=$?
printf '%s\\t%s\\t%s\\t%s\\t%s\\n' "$t0" "$EPOCHREALTIME" "$$" "$rc" "$args" >> {log}
exit $rc
"""


def now_ms() -> float:
    return time.time() * 1000


# ---- what the extension ran --------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One ``pi-workflows`` call the extension made (epoch ms; no end for a runner)."""

    start: float
    end: float | None
    pid: int
    argv: list[str]

    @property
    def kind(self) -> str:
        """The command and the flags that tell its use apart (``status --nodes``)."""
        words = [self.argv[0] if self.argv else "?"]
        words += [a for a in self.argv[1:] if a in ("--nodes", "--hold-follow-ups",
                                                    "--park-on-eof", "--no-wait")]
        return " ".join(words)

    @property
    def ms(self) -> float | None:
        return None if self.end is None else self.end - self.start


class CallLog:
    """The shim's log: one tab-separated line per call."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def calls(self) -> list[Call]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(errors="replace").splitlines():
            parts = line.split("\t", 4)
            if len(parts) != 5:
                continue
            t0, t1, pid, _rc, args = parts
            out.append(Call(float(t0) * 1000, None if t1 == "-" else float(t1) * 1000,
                            int(pid), shlex.split(args, posix=True) if args else []))
        return sorted(out, key=lambda c: c.start)

    def between(self, a: float, b: float) -> list[Call]:
        return [c for c in self.calls() if a <= c.start <= b]


def write_shim(path: Path, log: Path, real: Path) -> Path:
    path.write_text(SHIM.format(log=shlex.quote(str(log)), real=shlex.quote(str(real))))
    path.chmod(0o755)
    return path


# ---- Pi, stamped -------------------------------------------------------------------


class StampedPi(PiRpc):
    """``PiRpc`` whose events carry ``_at``: when the reader took the line (epoch ms)."""

    def _keep(self, event: dict[str, Any]) -> dict[str, Any]:
        return {**event, "_at": now_ms()}

    def stamped(self, kind: str, after: float = 0.0) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind and e.get("_at", 0) >= after]

    def footers(self, after: float = 0.0) -> list[tuple[float, str]]:
        """(arrival, text) of every footer status set after ``after``."""
        return [(float(e["_at"]), str(e.get("statusText") or ""))
                for e in self.stamped("extension_ui_request", after)
                if e.get("method") == "setStatus"]


# The step contract's own line names the attempt that counts (a retry note names another).
CONTRACT = re.compile(r"step ([\w-]+), attempt ([\w-]+)\.")
# One agent node: the in-session step of figure [3].
ASK = """
from pi_workflows import agent, define_workflow

workflow = define_workflow(
    start_at="ask",
    nodes=[agent("ask", "Say a colour.", expected_output={"type": "object"})],
)
"""


def route(request: Request) -> Reply:
    """The scripted model: ``start NAME WORDS`` -> the workflow tool's start, then a line;
    a step message -> its submission; any other prompt -> a plain text reply."""
    last = request.messages[-1] if request.messages else {}
    if last.get("role") == "tool":
        return Text("Queued; it runs after this turn.")
    users = request.texts("user")
    step = CONTRACT.findall(users[-1]) if users else []
    if step:
        node, attempt = step[-1]
        return ToolCalls(call("workflow", {"action": "submit", "step": node,
                                           "attempt": attempt, "output": {"colour": "teal"}}))
    words = users[-1].split() if users else []
    if len(words) >= 2 and words[0] == "start":
        return ToolCalls(start(words[1], task=" ".join(words[2:]) or "done"))
    return Text("Hello from the scripted model.")


@dataclass
class Rig:
    """The bench's Pi, its model, its project and the call log, shared by every scenario."""

    base: Path
    project: Project
    model: ScriptedModel
    pi: StampedPi
    log: CallLog
    timeout: float
    real_bin: Path = BIN  # what the shim runs
    session: str = ""
    children: list[subprocess.Popen[bytes]] = field(default_factory=list)
    hosts: list[HostProcess] = field(default_factory=list)
    clock: float = 0.0  # time.time() - time.monotonic(), for the server's receipt times

    def turn(self, text: str) -> tuple[float, float]:
        """Send a prompt; (sent, agent_end arrival), epoch ms."""
        sent = now_ms()
        response = self.pi.request({"type": "prompt", "message": text}, self.timeout)
        if not response.get("success"):
            raise PiError(f"prompt {text!r} refused: {response}")
        end = self.pi.read_until("agent_end", self.timeout)[-1]
        return sent, float(end["_at"])

    def quiet(self) -> bool:
        """No session runner left and the last footer is settled (or none)."""
        if activations(self.project):
            return False
        shown = self.pi.footers()
        return not shown or not any(w in shown[-1][1] for w in ("queued", "starting",
                                                                 "running"))

    def wait(self, what: str, check: Callable[[], Any], timeout: float | None = None) -> Any:
        got = poll(check, self.timeout if timeout is None else timeout, 0.02)
        if not got:
            raise HarnessError(f"timed out waiting for {what}")
        return got

    def events(self, run_id: str) -> list[Any]:
        with self.project.store() as store:
            return [e for e in all_events(store) if e.run_id == run_id]


@contextlib.contextmanager
def rig(base: Path, timeout: float, extension: Path | None = None,
        real_bin: Path = BIN) -> Iterator[Rig]:
    project = bench_project(base, "piext", base / "home", "node")
    project.write_workflow("quick", QUICK)
    project.write_workflow("flow", FLOW)
    project.write_workflow("ask", ASK)
    log = CallLog(base / "calls.tsv")
    shim = write_shim(base / "pi-workflows-shim", log.path, real_bin)
    with ScriptedModel(route) as model:
        pi_env = pi_env_for(project, model, base / "pi")
        pi_env.env["PI_WORKFLOWS_BIN"] = str(shim)
        pi = StampedPi(pi_env, "-e", str(extension or extension_path()), "--session-dir",
                       str(pi_env.agent_dir / "sessions"), session=True)
        r = Rig(base, project, model, pi, log, timeout, real_bin,
                clock=time.time() - time.monotonic())
        try:
            pi.wait_ready(timeout)
            r.session = session_id(pi)
            yield r
        finally:
            pi.close()
            kill_activations(project)
            _wait_shims(shim, timeout)
            for child in r.children:
                if child.poll() is None:
                    child.kill()
                child.wait()
            for host in r.hosts:
                if host.poll() is None:
                    project.stop_host(host)


def _wait_shims(shim: Path, timeout: float) -> None:
    """Until no call the extension started is still running: Pi does not end its children
    when it exits, and a late one would write its log line into the removed directory."""
    def running() -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                if str(shim) in proc.cmdline():
                    found.append(proc)
        return found

    if poll(lambda: not running(), timeout, 0.05) is None:
        for proc in running():
            with contextlib.suppress(psutil.Error):
                proc.kill()


# ---- figures -----------------------------------------------------------------------


@dataclass
class Figures:
    """What one scenario measured: named samples (ms) and lines to print."""

    samples: dict[str, list[float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, name: str, value: float | None) -> None:
        if value is not None:
            self.samples.setdefault(name, []).append(value)


def stats(values: list[float]) -> str:
    if not values:
        return "no samples"
    return (f"p50 {pct(values, 0.5):6.0f}  p95 {pct(values, 0.95):6.0f}  max {max(values):6.0f} ms"
            f"  (n={len(values)})")


def goal(values: list[float], limit: float) -> str:
    if not values:
        return f"goal p50 <= {limit:.0f} ms: no samples"
    p50 = pct(values, 0.5)
    return f"goal p50 <= {limit:.0f} ms: {'met' if p50 <= limit else 'NOT met'}"


def _at(call: Call | None, edge: str) -> float | None:
    """A call's start or end (None for no call, or a runner's end)."""
    if call is None:
        return None
    return call.start if edge == "start" else call.end


def _first_after(calls: list[Call], kind: str, after: float) -> Call | None:
    return next((c for c in calls if c.kind == kind and c.start >= after), None)


def _settled(store: Store, run_id: str) -> bool:
    row = store.get(run_id)
    return row is not None and row.state in TERMINAL


def turn_to_node(r: Rig, n: int) -> Figures:
    """[1] agent_end of the turn that called start -> the run's first node_started."""
    out = Figures()
    for i in range(n):
        r.wait("the session to settle", r.quiet)
        time.sleep(0.3)  # the extension's poll of the last run has ended
        _, ended = r.turn("start quick")
        run_id = next(e for e in reversed(r.pi.events) if e.get("type") == "tool_execution_end"
                      )["result"]["details"]["runId"]
        runners: dict[str, tuple[int, int]] = {}  # session runners seen: (pid, started_at)

        def finished(run_id: str = run_id,
                     runners: dict[str, tuple[int, int]] = runners) -> bool:
            for row in query(r.project, "SELECT runner_id, pid, started_at FROM runners"
                             " WHERE kind = 'session'"):
                runners.setdefault(str(row["runner_id"]), (int(row["pid"]),
                                                           int(row["started_at"])))
            return _settled(store, run_id)

        with r.project.store() as store:
            r.wait(f"run {run_id} to finish", finished)
            [t] = timelines(r.project, store, [run_id])
        calls = r.log.calls()
        status = _first_after(calls, "status --nodes", ended - 5)
        sync = _first_after(calls, "sync --hold-follow-ups", ended - 5)
        act = _first_after(calls, "activate --park-on-eof", ended - 5)
        registered = next((at for pid, at in runners.values() if act and pid == act.pid), None)
        if t.node_started is None:
            out.notes.append(f"run {run_id}: no node_started")
            continue
        out.add("agent_end -> first node_started", t.node_started - ended)
        steps: list[tuple[str, float | None, float | None]] = [
            ("agent_end -> settle's status starts", ended, _at(status, 'start')),
            ("status --nodes (wall)", _at(status, 'start'), _at(status, 'end')),
            ("status end -> sync starts", _at(status, 'end'), _at(sync, 'start')),
            ("sync --hold-follow-ups (wall)", _at(sync, 'start'), _at(sync, 'end')),
            ("sync end -> activate exec'd", _at(sync, 'end'), _at(act, 'start')),
            ("activate exec'd -> its runner row (imports, store)", _at(act, 'start'),
             registered),
            ("runner row -> claim (store starting)", registered, t.claimed),
            ("claim -> worker process started", t.claimed, t.created),
            ("worker boot -> processes.json entry", t.created, t.ready),
            ("-> run_started (trace)", t.ready, t.run_started),
            ("run_started -> node_started", t.run_started, t.node_started),
        ]
        for name, a, b in steps:
            out.add(f"  {name}", None if a is None or b is None else b - a)
        if i == 0:
            inturn = [c for c in calls if c.kind == "start"]
            if inturn and inturn[-1].ms is not None:
                out.notes.append(f"the tool's `start` call during the turn: {inturn[-1].ms:.0f} ms")
    return out


def _footer_lag(r: Rig, at: float, word: str) -> float | None:
    hit = r.wait(f"the footer to show {word!r}",
                 lambda: next((a for a, s in r.pi.footers(at) if word in s), None))
    return float(hit) - at


def _event_at(r: Rig, run_id: str, kind: str, after: float) -> float:
    found = r.wait(f"store event {kind} of {run_id}", lambda: next(
        (e.at for e in r.events(run_id) if e.type == kind and e.at >= after), None))
    return float(found)


def jitter() -> None:
    """A random pause before a host-driven change: the bench waits for footers, which
    come at the end of the extension's polls, so without it every change would land at
    the same phase of the one-second poll."""
    time.sleep(random.uniform(0.0, 1.1))


def _release(r: Rig) -> None:
    r.project.release()


def _unrelease(r: Rig) -> None:
    for name in ("release", "hold.started"):
        with contextlib.suppress(FileNotFoundError):
            (r.project.root / name).unlink()


def host_to_footer(r: Rig, n: int) -> Figures:
    """[2] a host resumes the session's parked run; a `run --session` elsewhere."""
    out = Figures()
    held = r.project.root / "hold.started"
    for _ in range(n):
        r.wait("the session to settle", r.quiet)
        _unrelease(r)
        _, ended = r.turn("start flow hold")
        run_id = r.pi.stamped("tool_execution_end", ended - 60_000)[-1]["result"]["details"][
            "runId"]
        r.wait("the held node", held.exists)
        [runner] = r.wait("the session runner", lambda: activations(r.project))
        mark = now_ms()
        runner.send_signal(signal.SIGTERM)  # it parks the run; Pi stays open
        parked = _event_at(r, run_id, "parked", mark)
        out.add("parked (session runner) -> footer parked", _footer_lag(r, parked, "parked"))
        jitter()
        host = r.project.start_host("--concurrency", "1", log="host.log")
        r.hosts.append(host)
        running = _event_at(r, run_id, "running", parked)
        out.add("host resumes: running -> footer running", _footer_lag(r, running, "running"))
        r.wait("the host's resumed node", lambda: len(held.read_text().split()) >= 2)
        jitter()
        mark = now_ms()
        _release(r)
        done = _event_at(r, run_id, "done", mark)
        out.add("host finishes: done -> footer completed", _footer_lag(r, done, "completed"))
        r.project.stop_host(host)
    for _ in range(n):
        r.wait("the session to settle", r.quiet)
        _unrelease(r)
        time.sleep(1.2)  # the extension is back to its idle watch (a stat each second)
        jitter()
        mark = now_ms()
        with open(r.base / "elsewhere.out", "ab") as sink:
            r.children.append(subprocess.Popen(
                [sys.executable, "-m", "pi_workflows", "run", "flow", "hold", "--session",
                 r.session, "--project", str(r.project.root)], env=r.project.env,
                stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT))
        run_id = str(r.wait("the run elsewhere", partial(_newest, r, mark)))
        running = _event_at(r, run_id, "running", mark)
        out.add("run --session elsewhere: running -> footer running",
                _footer_lag(r, running, "running"))
        r.wait("the held node", held.exists)
        jitter()
        mark = now_ms()
        _release(r)
        done = _event_at(r, run_id, "done", mark)
        out.add("run --session elsewhere: done -> footer completed",
                _footer_lag(r, done, "completed"))
        r.children[-1].wait(r.timeout)
    _unrelease(r)
    return out


def _newest(r: Rig, after: float) -> str | None:
    with r.project.store() as store:
        found = [e.run_id for e in all_events(store) if e.type == "queued" and e.at >= after]
    return found[-1] if found else None


def prompt_to_token(r: Rig, n: int) -> Figures:
    """[3] a plain prompt -> the first token from the scripted model."""
    out = Figures()
    for _ in range(n):
        r.wait("the session to settle", r.quiet)
        r.wait("the agent to be idle", partial(_idle, r))
        time.sleep(0.3)
        before = len(r.model.completions)
        sent, _ = r.turn("say hello")
        token = next((float(e["_at"]) for e in r.pi.stamped("message_update", sent)
                      if (e.get("assistantMessageEvent") or {}).get("type") == "text_delta"),
                     None)
        received = r.model.completions[before:]
        out.add("prompt sent -> first text delta", None if token is None else token - sent)
        if received:
            at = received[0].received_at * 1000 + r.clock * 1000
            out.add("  prompt sent -> model request at the server", at - sent)
            out.add("  server receipt -> first text delta",
                    None if token is None else token - at)
    return out


def _first_delta(r: Rig, after: float) -> float | None:
    """When the first streamed piece (text or a tool call) of a reply arrived after ``after``."""
    return next((float(e["_at"]) for e in r.pi.stamped("message_update", after)
                 if (e.get("assistantMessageEvent") or {}).get("type") in (
                     "text_delta", "toolcall_start")), None)


def _idle(r: Rig) -> bool:
    state = r.pi.request({"type": "get_state"}, r.timeout)
    return (state.get("data") or {}).get("isStreaming") is False


def _step_shown(r: Rig, after: float) -> float | None:
    """When a step message entered the conversation after ``after``."""
    for e in r.pi.stamped("message_start", after):
        message = e.get("message") or {}
        if message.get("role") == "custom" and (message.get("details") or {}).get(
                "kind") == "step":
            return float(e["_at"])
    return None


def step_to_token(r: Rig, n: int) -> Figures:
    """[1b] an in-session step message -> the model's first token, beside a plain prompt's."""
    out = Figures()
    for _ in range(n):
        r.wait("the session to settle", r.quiet)
        r.wait("the agent to be idle", partial(_idle, r))
        time.sleep(0.3)
        sent, _ = r.turn("say hello")
        plain = _first_delta(r, sent)
        out.add("plain prompt sent -> first streamed delta", None if plain is None
                else plain - sent)
        r.wait("the agent to be idle", partial(_idle, r))  # agent_end comes a little before
        began, ended = r.turn("start ask")
        # The step's own turn may be over already: take the start call's end, not the last.
        result = next((e["result"] for e in r.pi.stamped("tool_execution_end", began)
                       if ((e.get("result") or {}).get("details") or {}).get("action")
                       == "start"), {})
        run_id = (result.get("details") or {}).get("runId")
        if not run_id:
            out.notes.append(f"start refused: {str(result.get('content'))[:200]}")
            continue
        shown = r.wait("the step message in the conversation", partial(_step_shown, r, ended))
        token = r.wait("the step's first token", partial(_first_delta, r, shown))
        with r.project.store() as store:
            r.wait(f"run {run_id} to finish", partial(_settled, store, run_id))
        # The step's turn ends too: read its agent_end, so the next turn waits for its own.
        r.pi.read_until("agent_end", r.timeout)
        out.add("step message in the conversation -> first streamed delta", token - shown)
        # The worker's record of the prompt (trace time, ms) -> Pi showing the message.
        written = next((float(e["at"]) for e in Bundle(r.project.paths.runs_dir, run_id)
                        .scan().events if e["type"] == "agent_prompt_sent"), None)
        out.add("  worker sent the step -> message in the conversation",
                None if written is None else shown - written)
        if plain is not None:
            out.add("  step's first delta minus the plain prompt's (same session)",
                    (token - shown) - (plain - sent))
    plain_ms = out.samples.get("plain prompt sent -> first streamed delta", [])
    step_ms = out.samples.get("step message in the conversation -> first streamed delta", [])
    if plain_ms and step_ms:
        gap = pct(step_ms, 0.5) - pct(plain_ms, 0.5)
        out.notes.append(f"p50 step minus p50 plain prompt: {gap:+.0f} ms   goal within 50 ms:"
                         f" {'met' if gap <= 50 else 'NOT met'}")
    return out


def calls_per_turn(r: Rig, n: int) -> Figures:
    """[4] the extension's calls in an idle turn and in a turn with a run unfinished."""
    out = Figures()
    if not r.project.paths.store_file.exists():
        turn_to_node(r, 1)  # a store and a finished run, as in a session that has used it
    r.wait("the session to settle", r.quiet)
    time.sleep(1.5)
    sent, ended = r.turn("say hello")
    time.sleep(SETTLE_S)
    idle = r.log.between(sent, ended + SETTLE_S * 1000)
    out.notes += _count("idle turn, no unfinished run", idle, sent, ended)
    _unrelease(r)
    r.turn("start flow hold")
    held = r.project.root / "hold.started"
    r.wait("the held node", held.exists)
    time.sleep(1.5)
    sent, ended = r.turn("say hello")
    time.sleep(SETTLE_S)
    busy = r.log.between(sent, ended + SETTLE_S * 1000)
    out.notes += _count("turn with a run unfinished (held in a node)", busy, sent, ended)
    _release(r)
    r.wait("the held run to end", r.quiet)
    _unrelease(r)
    return out


def _count(what: str, calls: list[Call], sent: float, ended: float) -> list[str]:
    """Two lines: the calls by kind in the window, then each call's start after agent_end."""
    kinds: dict[str, int] = {}
    for c in calls:
        kinds[c.kind] = kinds.get(c.kind, 0) + 1
    shown = ", ".join(f"{k} x{v}" for k, v in sorted(kinds.items())) or "none"
    window = (ended + SETTLE_S * 1000 - sent) / 1000
    each = "; ".join(f"{c.kind} {c.start - ended:+.0f}" + ("" if c.ms is None else
                                                           f" ({c.ms:.0f} ms)")
                     for c in calls)
    return [f"{what}: {len(calls)} call(s) from the prompt to agent_end + {SETTLE_S:g} s"
            f" ({window:.1f} s): {shown}",
            f"  each call's start, ms after agent_end (its wall time): {each or 'none'}"]


def references(r: Rig, n: int) -> Figures:
    """The same CLI calls from the bench, no extension: what a call costs by itself."""
    out = Figures()
    env = dict(r.project.env)
    where = ["--project", str(r.project.root)]
    cases = [
        ("python -c pass", [sys.executable, "-c", "pass"], {}),
        ("status --nodes --session S --json (fast path)",
         [str(r.real_bin), "status", "--nodes", "--session", r.session, *where, "--json"], {}),
        ("the same through typer (PI_WORKFLOWS_NO_FAST_CLI=1)",
         [str(r.real_bin), "status", "--nodes", "--session", r.session, *where, "--json"],
         {"PI_WORKFLOWS_NO_FAST_CLI": "1"}),
        ("activate --session NOBODY (nothing to do; typer)",
         [str(r.real_bin), "activate", "--session", "nobody", *where], {}),
        # The extension's own form, on the fast path since issue 22's latency work.
        ("activate --session NOBODY --park-on-eof (fast path)",
         [str(r.real_bin), "activate", "--session", "nobody", "--park-on-eof", *where], {}),
    ]
    for _ in range(max(3, n)):  # interleaved, so a busy spell hits every case
        for name, argv, extra in cases:
            began = time.monotonic()
            # Pipes, not DEVNULL: with a timeout and no pipes, wait() polls with sleeps
            # of up to 50 ms, and the figure would measure that; communicate() reads to EOF.
            subprocess.run(argv, env={**env, **extra}, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=r.timeout, check=False)
            out.add(name, (time.monotonic() - began) * 1000)
    return out


# name -> (title, goal key, function); [4]'s mean wall times come from the whole log.
SCENARIOS: dict[str, tuple[str, str | None, Callable[[Rig, int], Figures]]] = {
    "turn": ("[1] end of turn -> the model-started run's first node started", "turn",
             turn_to_node),
    "step": ("[1b] in-session step message -> the model's first token", None,
             step_to_token),
    "footer": ("[2] host-driven change -> footer changed", "footer", host_to_footer),
    "token": ("[3] plain Pi prompt -> first token (the baseline for an in-session step)",
              None, prompt_to_token),
    "calls": ("[4] pi-workflows calls the extension makes per turn", None, calls_per_turn),
    "refs": ("[4b] the same CLI calls run directly, no extension (wall, interleaved)", None,
             references),
}


def report(title: str, goal_key: str | None, figures: Figures) -> None:
    print(f"\n  {title}")
    for name, values in figures.samples.items():
        line = f"    {name:<52} {stats(values)}"
        if goal_key and not name.startswith(" "):
            line += f"   {goal(values, GOALS[goal_key])}"
        print(line)
    for note in figures.notes:
        print(f"    {note}")


def call_costs(log: CallLog) -> None:
    by: dict[str, list[float]] = {}
    for c in log.calls():
        if c.ms is not None:
            by.setdefault(c.kind, []).append(c.ms)
    print("\n  mean wall time per kind of call over the whole bench (shim start -> exit)")
    for kind, values in sorted(by.items()):
        print(f"    {kind:<28} mean {statistics.fmean(values):5.0f} ms  p50"
              f" {pct(values, 0.5):5.0f}  max {max(values):5.0f} ms  (n={len(values)})")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench piext", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="example: python -m bench piext -n 8")
    parser.add_argument("-n", "--iterations", type=int, default=12,
                        help="samples of [1], [3] and [4b]; [2] runs each of its two cases"
                             " max(1, n // 2) times (default 12: about 80 s idle)")
    parser.add_argument("--quick", action="store_true", help="one sample of each (a smoke run)")
    parser.add_argument("--only", default=",".join(SCENARIOS),
                        help=f"comma list of {', '.join(SCENARIOS)}")
    parser.add_argument("--timeout", type=float, default=45.0, help="deadline of each wait (s)")
    parser.add_argument("--extension", type=Path, default=None,
                        help="load this extension file instead of this checkout's (to try a"
                             " change before making it; it must resolve this checkout's"
                             " node_modules, so keep it inside the checkout)")
    parser.add_argument("--real-bin", type=Path, default=BIN,
                        help="the pi-workflows the call-logging shim runs (default: this"
                             " checkout's)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    chosen = [x.strip() for x in args.only.split(",") if x.strip()]
    unknown = [x for x in chosen if x not in SCENARIOS]
    if unknown:
        print(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}",
              file=sys.stderr)
        return 2
    n = 1 if args.quick else max(1, args.iterations)
    began = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="pi-wf-piext-bench-"))
    print(f"piext bench: python {sys.version.split()[0]}, {os.cpu_count()} CPU(s), load average"
          f" {load_average()}; n={n}; dir {base}")
    try:
        if args.extension or args.real_bin != BIN:
            print(f"  trying: extension {args.extension or 'this checkout'}, pi-workflows"
                  f" {args.real_bin}")
        extension = args.extension.resolve() if args.extension else None
        with rig(base, args.timeout, extension, args.real_bin.resolve()) as r:
            for name in chosen:
                title, goal_key, fn = SCENARIOS[name]
                count = max(1, n // 2) if name == "footer" else n
                try:
                    report(title, goal_key, fn(r, count))
                except (HarnessError, PiError) as exc:
                    print(f"\n  {title}\n    ! {str(exc).splitlines()[0]}")
            call_costs(r.log)
    except (HarnessError, PiError, OSError) as exc:
        print(f"  ! {str(exc).splitlines()[0] if str(exc) else exc!r}")
    finally:
        finish_bench(PROJECTS, base, keep=args.keep, began=began)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
