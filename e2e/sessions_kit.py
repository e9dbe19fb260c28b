"""What the session drills share: their workflows, CLI children and raw store reads.

A session's commands (``start``, ``activate``, ``sync``...) run as real
``pi-workflows`` subprocesses: finished ones through ``Project.cli``, long
ones through ``Children`` (output to a file, or read live with the
harness's ``LineReader``), a terminal on a real pty (``Terminal``). The
store is read with plain read-only SQLite for what the store API does not
show (notification rows, a session's watermark). Imports ``e2e.harness``,
``e2e.snippets`` and ``tests.helpers``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import sqlite3
import struct
import subprocess
import sys
import termios
from typing import Any

import psutil
from pi_workflows.protocol.wire import MARKER_ENV

from tests.helpers.processes import ctrl_c_default, reap

from .harness import LineReader, Project, alive, wait_for
from .snippets import HOLD

# task words pick the path: done -> 0, hold -> held node then 0, ask -> 3, fail -> 1.
FLOW = HOLD + """
from pi_workflows import define_workflow, compute, checkpoint, edge, switch

def pick(ctx):
    return {"mode": ctx.input.get("task", "done")}

def boom(ctx):
    raise RuntimeError("no luck today")

workflow = define_workflow(
    start_at="pick",
    nodes=[compute("pick", pick), compute("hold", hold("hold")),
           checkpoint("ask", summary="go on?"), compute("boom", boom),
           compute("end", lambda ctx: {"ok": True})],
    edges=[switch("pick", "$.mode", {"done": "end", "hold": "hold", "ask": "ask",
                                     "fail": "boom"}),
           edge("hold", "end")],
)
"""

QUICK = """
import json
from pi_workflows import define_workflow, compute

def one(ctx):
    with open(ctx.project_dir / "quick.ran", "a") as fh:
        fh.write(ctx.run_id + "\\n")
    return {"ok": True, "inputBytes": len(json.dumps(ctx.input))}

workflow = define_workflow(start_at="one", nodes=[compute("one", one)])
"""

# Importing the file blocks while `block-load` exists and `release-load` does not:
# a worker that loads it stays in `starting` with no bundle (preflight ran before).
SLOW_LOAD = """
import pathlib, time
_root = pathlib.Path(__file__).resolve().parents[2]
if (_root / "block-load").exists():
    with open(_root / "load.started", "a") as fh:
        fh.write("loading\\n")
    while not (_root / "release-load").exists():
        time.sleep(0.02)

from pi_workflows import define_workflow, compute

def one(ctx):
    with open(ctx.project_dir / "one.ran", "a") as fh:
        fh.write(ctx.run_id + "\\n")
    return {"ok": 1}

workflow = define_workflow(start_at="one", nodes=[compute("one", one)])
"""

# A notification, then a held node: the message is stored before the run can end.
NOTIFY_HOLD = HOLD + """
from pi_workflows import define_workflow, compute, notify, edge

workflow = define_workflow(
    start_at="tell",
    nodes=[notify("tell", "halfway there"), compute("hold", hold("hold")),
           compute("end", lambda ctx: {"ok": True})],
    edges=[edge("tell", "hold"), edge("hold", "end")],
)
"""


def run_id(proc: subprocess.CompletedProcess[str]) -> str:
    """The run id of a ``start --json`` (or ``run --detach --json``)."""
    return str(json.loads(proc.stdout)["runId"])


def cli_argv(project: Project, *args: str) -> list[str]:
    return [sys.executable, "-m", "pi_workflows", *args, "--project", str(project.root)]


def cli_with_stdin(project: Project, data: bytes, *args: str,
                   timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(cli_argv(project, *args), env=project.env, input=data,
                          capture_output=True, timeout=timeout)


class Children:
    """CLI subprocesses a drill starts and waits for; ``kill_all`` at teardown."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.procs: list[subprocess.Popen[Any]] = []

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        """``pi-workflows ARGS`` with stdout and stderr in ``<root>/<name>.out``.

        A file, not a pipe: a worker inherits the output, and a frozen or
        orphaned one would keep a pipe open.
        """
        with open(self.project.root / f"{name}.out", "ab") as out:
            proc = subprocess.Popen(cli_argv(self.project, *args), env=self.project.env,
                                    stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def piped(self, *args: str) -> tuple[subprocess.Popen[str], LineReader]:
        """``pi-workflows ARGS`` with its stdout read line by line (stderr to a file)."""
        with open(self.project.root / "piped.err", "ab") as err:
            proc = subprocess.Popen(cli_argv(self.project, *args), env=self.project.env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=err, text=True, preexec_fn=ctrl_c_default)
        self.procs.append(proc)
        assert proc.stdout is not None
        return proc, LineReader(proc.stdout)

    def output(self, name: str) -> str:
        return (self.project.root / f"{name}.out").read_text(errors="replace")

    def kill_all(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                reap(proc)


def on_pty(project: Project, *args: str) -> tuple[subprocess.Popen[bytes], int]:
    """Start a CLI command with a new pty as its controlling terminal; (process, master fd)."""
    return pty_child(cli_argv(project, *args), project.env)


def pty_child(argv: list[str], env: dict[str, str],
              size: tuple[int, int] | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``argv`` as a session leader on a new pty, its controlling terminal;
    (process, master fd). Closing the master hangs the terminal up. ``size``
    (rows, columns) is set before the child starts, so it never sees a resize
    while it draws its first screen."""
    master, slave = os.openpty()
    if size is not None:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[0], size[1], 0, 0))

    def take_terminal() -> None:  # in the child, after setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(argv, env=env, stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True, preexec_fn=take_terminal)
    os.close(slave)
    return proc, master


class Terminal:
    """A CLI command on a real pty, as a person runs it: its controlling terminal,
    so a typed Ctrl-C reaches it through the line discipline."""

    def __init__(self, project: Project, *args: str) -> None:
        self.proc, master = on_pty(project, *args)
        self._master = master
        self.reader = LineReader(os.fdopen(master, "r", errors="replace"))

    def type(self, data: bytes) -> None:
        os.write(self._master, data)

    def wait_line(self, text: str, timeout: float = 30) -> str:
        while True:
            line = self.reader.next(timeout, what=repr(text))
            if text in line:
                return line.rstrip("\r\n")

    def text(self) -> str:
        return "".join(self.reader.seen)

    def close(self) -> None:
        reap(self.proc)


def worker_of(cli: subprocess.Popen[Any], timeout: float = 30) -> psutil.Process:
    """The worker subprocess a session CLI (``activate``, ``run``) started."""

    def find() -> psutil.Process | None:
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(cli.pid).children():
                if MARKER_ENV in child.environ():
                    return child
        return None

    found: psutil.Process = wait_for(find, timeout, what=f"the worker of pid {cli.pid}")
    return found


def crash(cli: subprocess.Popen[Any], worker: psutil.Process) -> None:
    """kill -9 of the activating process and its worker, as a machine-level crash:
    the worker is frozen first so it cannot park the run when its parent dies."""
    worker.send_signal(signal.SIGSTOP)
    cli.kill()
    cli.wait(10)
    worker.kill()  # an orphan now: reaped by init, so not waited for here
    wait_for(lambda: not alive(worker.pid), 10, what=f"worker {worker.pid} to die")


def marked_processes(run: str) -> list[int]:
    """Pids of processes whose marker names run ``run`` (a worker and its children)."""
    pids = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.environ().get(MARKER_ENV, "").endswith(f"/{run}"):
                pids.append(proc.pid)
    return pids


def store_events(project: Project, run: str) -> list[tuple[str, dict[str, Any]]]:
    """The run's store feed: (type, payload) oldest first."""
    with project.store() as store:
        return [(e.type, e.payload) for e in store.events_since(0, run_id=run)]


def query(project: Project, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
    """Rows of a read-only query on the project's store."""
    db = sqlite3.connect(f"file:{project.paths.store_file}?mode=ro", uri=True, timeout=10)
    try:
        db.row_factory = sqlite3.Row
        return list(db.execute(sql, params))
    finally:
        db.close()


def sync_lines(project: Project, session: str) -> list[str]:
    return project.cli("sync", "--session", session).stdout.splitlines()


def sync_json(project: Project, session: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(project.cli("sync", "--session", session,
                                                 "--json").stdout)
    return out


def follow_up(workflow: str, run: str, reason: str) -> str:
    return (f"follow-up: Workflow {workflow} failed to start (run {run}): {reason}. Inspect the"
            " error and call workflow start again only after you correct the cause.")


def no_rows(project: Project) -> bool:
    listing = project.cli("list", "--json")
    return json.loads(listing.stdout) == {"runs": []}


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]
