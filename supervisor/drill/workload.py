"""The drill's workload: the workflow files it writes and the ways it starts runs.

Owns the workflows (a compute chain with a guarded shell effect, a loop that
routes on ``$result.outcome`` around a shell effect, a checkpoint the drill
answers, a session run with notifications, an agent step through the real
Pi, a composed graph whose included child holds an effect and two exits, a
human decision the drill and the host's ``on_timeout`` race to answer, and
progress updates from shell lines and an action) and the launches:
detached runs for the host (``run --detach``), session runs on a
pseudo-terminal (``run --session``), deferred launches (``start`` then
``activate``), launches doomed to fail (their workflow file changes between
``start`` and ``activate``, so activation records ``failed`` and a follow-up
for the session), answers and ``sync`` catch-ups, whose deliveries are
journalled so the checker can see a message delivered twice or never. Every
shell effect appends ``<run> <node> <pass>`` to the ledger outside the
bundles.
Imports ``supervisor.drill.scratch`` and ``protocol``; never the worker.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import termios
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...protocol.spawn import PIPE, Popen, TimeoutExpired
from .scratch import Scratch, write_private

COMMON = '''
import time
from pi_workflows import (action, agent, checkpoint, choice, compute, decision, decision_edge,
                          define_workflow, edge, human_decision, human_decision_edge, include,
                          notify, parse_line, shell, switch, text_input)


def pause(seconds):
    # A node that takes a while, so faults land mid-node; it stops early when asked.
    def fn(ctx):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if ctx.cancelled():
                raise RuntimeError("stopped")
            time.sleep(0.02)
        return {"node": ctx.node_id, "pass": ctx.outputs.get("count", {}).get("i", 0)}
    return fn


def effect(ctx):
    # A guarded effect: one ledger line per (run, node, pass), never two. Inside an
    # include the node's id in the run (its effect record's) is mount/local.
    node = f"{ctx.mount}/{ctx.node_id}" if ctx.mount else ctx.node_id
    line = f"{ctx.run_id} {node} {ctx.outputs.get('count', {}).get('i', 0)}"
    return ["sh", "-c", 'sleep 0.1; echo "$1" >> "$2"', "effect", line,
            str(ctx.project_dir / "ledger.txt")]
'''

WORKFLOWS: dict[str, str] = {
    "chain": COMMON + '''
workflow = define_workflow(
    start_at="a",
    nodes=[compute("a", pause(0.3)), compute("b", pause(0.3)), shell("fx", effect),
           compute("c", pause(0.3)), compute("d", lambda ctx: {"done": True})],
    edges=[edge("a", "b"), edge("b", "fx"), edge("fx", "c"), edge("c", "d")],
)
''',
    "loop": COMMON + '''
def count(ctx):
    time.sleep(0.1)
    return {"i": ctx.outputs.get("count", {}).get("i", 0) + 1}


workflow = define_workflow(
    start_at="count",
    nodes=[compute("count", count), shell("fx", effect), compute("more", lambda ctx: {
               "again": ctx.outputs["count"]["i"] < 3}),
           compute("end", lambda ctx: {"passes": ctx.outputs["count"]["i"]})],
    edges=[edge("count", "fx"),
           # A failed effect (an indeterminate one after a kill) goes on like a good one.
           switch("fx", "$result.outcome", {"ok": "more", "failed": "more"}),
           switch("more", "$.again", {True: "count", False: "end"})],
    max_steps=40,
)
''',
    "gate": COMMON + '''
workflow = define_workflow(
    start_at="prep",
    nodes=[compute("prep", pause(0.2)), checkpoint("ask", summary="go on?"),
           shell("fx", effect), compute("end", lambda ctx: {"answer": ctx.outputs["ask"]})],
    edges=[edge("prep", "ask"), edge("ask", "fx"), edge("fx", "end")],
)
''',
    "notes": COMMON + '''
workflow = define_workflow(
    start_at="tell",
    nodes=[notify("tell", "halfway there"), compute("work", pause(0.6)),
           notify("last", "all done", kind="final")],
    edges=[edge("tell", "work"), edge("work", "last")],
)
''',
    "think": COMMON + '''
workflow = define_workflow(
    start_at="warm",
    nodes=[compute("warm", pause(0.1)),
           agent("plan", "Say ok for the drill",
                 expected_output={"type": "object", "required": ["ok"]}, timeout=60),
           decision("pick", question="Go on or stop?", choices=["go", "stop"], timeout=60),
           shell("fx", effect), compute("stop", lambda ctx: {"stopped": True})],
    edges=[edge("warm", "plan"), edge("plan", "pick"),
           decision_edge("pick", {"go": "fx", "stop": "stop"})],
)
''',
    # Included by ``composed``: an effect inside a mount and two named exits.
    "part": COMMON + '''
workflow = define_workflow(
    start_at="work",
    nodes=[compute("work", pause(0.2)), shell("fx", effect),
           compute("passed", lambda ctx: {"ok": True, "n": ctx.input["n"]}),
           compute("failed", lambda ctx: {"ok": False})],
    edges=[edge("work", "fx"),
           # An indeterminate effect (a kill mid-effect) leaves by the other exit.
           switch("fx", "$result.outcome", {"ok": "passed"}, default="failed")],
    exits={"passed": "passed", "failed": "failed"},
    max_steps=10,
)
''',
    "composed": COMMON + '''
workflow = define_workflow(
    title=lambda value: "composed drill run",
    start_at="pre",
    nodes=[compute("pre", pause(0.2), status_detail="warming up"),
           include("part.workflow.py", input=lambda ctx: {"n": 1}, as_="part"),
           shell("fx", effect),
           compute("end", lambda ctx: {"via": "passed"}),
           compute("alt", lambda ctx: {"via": "failed"})],
    edges=[edge("pre", "part"), edge("part.passed", "fx"), edge("part.failed", "alt"),
           edge("fx", "end")],
)
''',
    # A human decision the drill answers "yes" -- or the host answers "no" first, when
    # its short timeout passes: the two race, and exactly one continuation may win.
    "decide": COMMON + '''
workflow = define_workflow(
    start_at="prep",
    nodes=[compute("prep", pause(0.2)),
           human_decision("ask", question="go on?",
                          choices=[choice("yes"), choice("no", input={"why": "late"}),
                                   text_input("other", "say what", max_length=40)],
                          on_timeout="no", timeout=4),
           shell("fx", effect), compute("end", lambda ctx: {"answer": ctx.answer}),
           compute("stop", lambda ctx: {"stopped": ctx.outputs["ask"]["choice"]})],
    edges=[edge("prep", "ask"),
           human_decision_edge("ask", {"yes": "fx", "no": "stop", "other": "stop"}),
           edge("fx", "end")],
)
''',
    # Progress: a shell node's lines become updates, an action publishes its own.
    "progress": COMMON + '''
def progress_line(line):
    if line.startswith("done "):
        done, total = line.split()[1].split("/")
        return {"progress": {"done": int(done), "total": int(total)}}
    return None


def lines(ctx):
    # Every guarded effect leaves its ledger line, this one after its progress lines.
    line = effect(ctx)[4]
    return ["sh", "-c", 'for i in 1 2 3 4 5; do sleep 0.08; echo "done $i/5"; done;'
            ' echo "$1" >> "$2"', "lines", line, str(ctx.project_dir / "ledger.txt")]


def steps(ctx):
    for i in range(1, 6):
        ctx.publish_update({"progress": {"done": i, "total": 5}, "message": f"part {i}"})
        time.sleep(0.05)
    with open(ctx.project_dir / "ledger.txt", "a") as fh:  # a guarded effect's line
        fh.write(effect(ctx)[4] + "\\n")
    return {"parts": 5}


workflow = define_workflow(
    start_at="lines",
    nodes=[shell("lines", lines, updates=parse_line(progress_line),
                 parse=lambda result, ctx: {"lines": len(result["stdout"].splitlines())}),
           action("publish", steps), shell("fx", effect)],
    edges=[edge("lines", "publish"), edge("publish", "fx")],
)
''',
}
# A one-node workflow; its file is edited after ``start`` (see ``Launcher.doomed``).
DOOMED = """
from pi_workflows import compute, define_workflow

workflow = define_workflow(start_at="one", nodes=[compute("one", lambda ctx: {"one": 1})])
"""
RUN_LINE = re.compile(r"run ([A-Za-z0-9][A-Za-z0-9._-]*) \(")
DETACHED = ("chain", "loop", "gate", "composed", "decide", "progress")


def write_workflows(scratch: Scratch, agents: bool) -> list[str]:
    """Write the drill's workflow files; the names written."""
    folder = scratch.root / ".pi" / "workflows"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    names = [n for n in WORKFLOWS if agents or n != "think"]
    for name in names:
        write_private(folder / f"{name}.workflow.py", WORKFLOWS[name])
    return names


@dataclass
class Pty:
    """A CLI command on a new pseudo-terminal (its controlling terminal), as a person
    runs it; a thread drains the terminal so the command never blocks on output."""

    proc: Popen[bytes]
    session: str
    master: int
    _reader: threading.Thread | None = None
    shown: bytearray = field(default_factory=bytearray)  # the first KiB it printed

    @classmethod
    def start(cls, scratch: Scratch, session: str, *args: str) -> Pty:
        master, slave = os.openpty()

        def take_terminal() -> None:  # in the child, after setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        try:
            proc = Popen(scratch.argv(*args), env=scratch.env, stdin=slave, stdout=slave,
                         stderr=slave, start_new_session=True, preexec_fn=take_terminal)
        finally:
            os.close(slave)
        pty = cls(proc, session, master)
        pty._reader = threading.Thread(target=pty._drain, daemon=True, name="drill-pty")
        pty._reader.start()
        return pty

    def _drain(self) -> None:
        with contextlib.suppress(OSError):
            while chunk := os.read(self.master, 65536):
                if len(self.shown) < 1024:
                    self.shown.extend(chunk[:1024])

    def run_id(self) -> str | None:
        """The run id the command printed first (``run ID (workflow); ...``)."""
        found = RUN_LINE.search(self.shown.decode(errors="replace"))
        return found.group(1) if found else None

    def reap(self) -> int | None:
        """The exit code once the command ended (the terminal is closed then)."""
        code = self.proc.poll()
        if code is not None and self.master >= 0:
            if self._reader is not None:
                self._reader.join(1)
            with contextlib.suppress(OSError):
                os.close(self.master)
            self.master = -1
        return code


@dataclass
class Launcher:
    """Starts runs and session commands; remembers every run id it was given."""

    scratch: Scratch
    launched: list[str] = field(default_factory=list)
    sessions: list[Pty] = field(default_factory=list)  # run --session on a pty
    activations: list[tuple[str, Popen[bytes]]] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)  # why a launch did not happen
    log: Callable[[str], None] = lambda _: None

    def _cli(self, *args: str, timeout: float = 60) -> tuple[int, str]:
        proc = self.scratch.spawn(*args, stdout=PIPE)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        return proc.returncode, out.decode(errors="replace")

    def _json_run_id(self, code: int, out: str, what: str) -> str | None:
        if code != 0:
            self.refused[what] = self.refused.get(what, 0) + 1
            return None
        with contextlib.suppress(ValueError, KeyError, TypeError):
            run_id = str(json.loads(out)["runId"])
            self.launched.append(run_id)
            return run_id
        self.refused[what] = self.refused.get(what, 0) + 1
        return None

    def detach(self, workflow: str, session: str | None = None) -> str | None:
        extra = ("--session", session) if session else ()
        code, out = self._cli("run", workflow, "--detach", "--json", *extra)
        return self._json_run_id(code, out, f"detach:{code}")

    def session_run(self, workflow: str, session: str) -> None:
        """``run WORKFLOW --session S`` on a pty; its run id is found by the session."""
        self.sessions.append(Pty.start(self.scratch, session, "run", workflow,
                                       "--session", session))

    def deferred(self, workflow: str, session: str) -> str | None:
        """``start`` (a durable reservation), then ``activate`` in the background."""
        code, out = self._cli("start", workflow, "--session", session, "--json")
        run_id = self._json_run_id(code, out, f"start:{code}")
        if run_id is not None:
            self.activate(session)
        return run_id

    def doomed(self, session: str, serial: int) -> str | None:
        """A deferred launch whose source changes before it activates (seed 002's
        failure path): ``start``, edit the file, ``activate``."""
        name = f"doomed{serial}"
        path = self.scratch.root / ".pi" / "workflows" / f"{name}.workflow.py"
        write_private(path, DOOMED)
        code, out = self._cli("start", name, "--session", session, "--json")
        run_id = self._json_run_id(code, out, f"doomed:{code}")
        if run_id is not None:
            write_private(path, DOOMED + "# changed after the launch was queued\n")
            self.activate(session)
        return run_id

    def activate(self, session: str) -> Popen[bytes]:
        proc = self.scratch.spawn("activate", "--session", session, log="activate.log")
        self.activations.append((session, proc))
        return proc

    def answer(self, run_id: str) -> str | None:
        code, out = self._cli("answer", run_id, "yes", "--json")
        if code != 0:
            self.refused[f"answer:{code}"] = self.refused.get(f"answer:{code}", 0) + 1
            return None
        with contextlib.suppress(ValueError, KeyError, TypeError):
            child = str(json.loads(out)["runId"])
            self.launched.append(child)
            return child
        return None

    def sync(self, session: str) -> dict[str, Any] | None:
        """``sync --session S --json``; what it delivered goes to the delivery journal."""
        code, out = self._cli("sync", "--session", session, "--json")
        if code != 0:
            self.refused[f"sync:{code}"] = self.refused.get(f"sync:{code}", 0) + 1
            return None
        try:
            data: dict[str, Any] = json.loads(out)
        except ValueError:
            return None
        lines = [json.dumps({"session": session, "notification": n.get("id"),
                             "runId": n.get("runId")}) for n in data.get("notifications", [])]
        lines += [json.dumps({"session": session, "intent": f.get("intentId"),
                              "runId": f.get("runId")}) for f in data.get("followUps", [])]
        if lines:
            path = self.scratch.work / "deliveries.ndjson"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "a") as fh:
                fh.write("".join(line + "\n" for line in lines))
        return data

    def busy_sessions(self) -> set[str]:
        """Sessions with a live session command of ours (a run or an activation)."""
        for pty in self.sessions:
            if pty.reap() is not None and (found := pty.run_id()) and found not in self.launched:
                self.launched.append(found)
        live = {p.session for p in self.sessions if p.reap() is None}
        live |= {s for s, proc in self.activations if proc.poll() is None}
        return live

    def live_session_processes(self) -> list[tuple[str, Popen[bytes]]]:
        return [(p.session, p.proc) for p in self.sessions if p.reap() is None] + \
            [(s, proc) for s, proc in self.activations if proc.poll() is None]
