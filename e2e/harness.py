"""The real-process harness shared by the e2e drills and the host bench.

Owns a throw-away project (its directory and an environment that holds
only its own ``PI_WORKFLOWS_*`` settings, never the caller's), starting
``pi-workflows host`` subprocesses (or ``host --background`` ones) and
knowing when they are ready (the host lock file says ``ready`` for that
pid), stopping them, enqueueing runs in-process, reading the queue, the
store's events, bundles and logs, reading a child's output with a
deadline, and killing every process a project left behind. Polling with a
deadline (``poll``, ``wait_for``, ``HarnessError``) and ``alive`` are
``tests.helpers``', re-exported here for the drills and the benches.
Imports ``pi_workflows``' ``protocol`` modules, the supervisor's reaper and
host finder, and ``tests.helpers``; not pytest, so the bench runs without
it.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import psutil
from pi_workflows.protocol.bundle import Bundle
from pi_workflows.protocol.clock import now_ms
from pi_workflows.protocol.definitions.discovery import Catalog, discover_for
from pi_workflows.protocol.settings import Paths, Settings, load_settings, resolve_paths
from pi_workflows.protocol.store import QueueRow, RunEvent, Store
from pi_workflows.protocol.wakeup import poke
from pi_workflows.supervisor.session.launch import prepare_run

# Re-exported for the drills and the benches (``from e2e.harness import poll``).
from tests.helpers.processes import alive as alive
from tests.helpers.waiting import HarnessError as HarnessError
from tests.helpers.waiting import poll as poll
from tests.helpers.waiting import wait_for as wait_for

PREFIX = "PI_WORKFLOWS_"


class LineReader:
    """A child's text output read by a thread, so a caller waits for a line with a deadline.

    ``readline`` on a pipe blocks for as long as the child stays quiet; a
    thread that queues the lines lets a hung child fail the caller fast.
    """

    _EOF = None

    def __init__(self, stream: IO[str]) -> None:
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        with contextlib.suppress(ValueError, OSError):  # the pipe closed under us
            for line in stream:
                self._lines.put(line)
        self._lines.put(self._EOF)

    def next(self, timeout: float = 30.0, what: str = "a line") -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise HarnessError(f"no output after {timeout:g} s waiting for {what};"
                               f" read so far: {self.seen!r}") from None
        if line is self._EOF:
            self._lines.put(self._EOF)  # stays at the end for any later call
            raise HarnessError(f"output ended before {what}; read: {self.seen!r}")
        self.seen.append(line)
        return line


# ---- a project ---------------------------------------------------------------------


def clean_env(home: Path, **settings: str) -> dict[str, str]:
    """This process's environment without any ``PI_WORKFLOWS_*``, plus ``home`` and
    ``settings`` (given as ``PI_WORKFLOWS_...`` names)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(PREFIX)}
    env[f"{PREFIX}HOME"] = str(home)
    env.update(settings)
    return env


def read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; {} if it is missing, empty or half-written."""
    try:
        value = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


@dataclass
class HostProcess:
    """One ``pi-workflows host`` subprocess and what its lock file said once it was ready."""

    proc: subprocess.Popen[bytes]
    log: Path
    spawned_at: int  # epoch ms just before the spawn
    lock: dict[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def runner_id(self) -> str | None:
        return self.lock.get("runnerId")

    @property
    def startup_s(self) -> float | None:
        """Spawn -> ready (the lock's ``readyAt``), on the one epoch-ms clock."""
        ready = self.lock.get("readyAt")
        return (int(ready) - self.spawned_at) / 1000 if ready is not None else None

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.proc.wait(timeout)

    def send_signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


class Project:
    """A project directory, the environment its processes get, and its hosts."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.env = env  # callers may change settings here before starting processes
        self.hosts: list[HostProcess] = []
        self.adopted: list[tuple[int, float]] = []  # (pid, start time) of background hosts
        self._settings: tuple[tuple[tuple[str, str], ...], Settings] | None = None
        self._catalog: Catalog | None = None

    # -- settings and paths, resolved from self.env alone --

    @property
    def settings(self) -> Settings:
        mine = tuple(sorted((k, v) for k, v in self.env.items() if k.startswith(PREFIX)))
        if self._settings is None or self._settings[0] != mine:
            # Settings read os.environ: show them this project's settings only.
            saved = dict(os.environ)
            try:
                for key in [k for k in os.environ if k.startswith(PREFIX)]:
                    del os.environ[key]
                os.environ.update(mine)
                self._settings = (mine, load_settings())
            finally:
                os.environ.clear()
                os.environ.update(saved)
        return self._settings[1]

    @property
    def paths(self) -> Paths:
        return resolve_paths(self.settings, self.root)

    def store(self) -> Store:
        """The store with the project's lease (claims made here expire like a runner's).

        The busy timeout stays the default: a drill that locks the store on
        purpose must not make the test's own reads give up.
        """
        return Store(self.paths.store_file, lease_ms=self.settings.lease_ms,
                     url=self.settings.store_url)

    # -- making runs --

    def write_workflow(self, name: str, body: str) -> Path:
        path = self.root / ".pi" / "workflows" / f"{name}.workflow.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body))
        self._catalog = None
        return path

    def cli(self, *args: str, check: bool = True,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([sys.executable, "-m", "pi_workflows", *args, "--project",
                               str(self.root)], env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise HarnessError(f"{args} exited {proc.returncode}: {proc.stderr}")
        return proc

    def detach(self, name: str, payload: Any = None) -> str:
        """``run NAME --detach`` through the CLI; the run id."""
        args = ["run", name, "--detach", "--json"]
        if payload is not None:
            args += ["--input-json", json.dumps(payload)]
        return str(json.loads(self.cli(*args).stdout)["runId"])

    def enqueue(self, store: Store, workflow: str, count: int = 1,
                payload: Any = None) -> list[str]:
        """``count`` detached runs written in-process (as ``run --detach`` does); one poke."""
        if self._catalog is None:
            self._catalog = discover_for(self.settings, self.root)
        ids = []
        for _ in range(count):
            prepared = prepare_run(self._catalog, workflow, {} if payload is None else payload)
            store.enqueue_detached(prepared.run_id, prepared.source, prepared.input)
            ids.append(prepared.run_id)
        poke(self.paths.state_dir)
        return ids

    # -- hosts --

    def start_host(self, *extra: str, log: str = "host.log",
                   timeout: float = 60.0) -> HostProcess:
        """Spawn a host and return once its lock file says that very process is ready."""
        path = self.root / log
        spawned_at = now_ms()
        with open(path, "ab") as out:  # the child keeps its own descriptor
            proc = subprocess.Popen([sys.executable, "-m", "pi_workflows", "host", "--project",
                                     str(self.root), *extra], env=self.env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        host = HostProcess(proc, path, spawned_at)
        self.hosts.append(host)
        lock = self.paths.host_lock

        def ready_or_exited() -> dict[str, Any] | None:
            if proc.poll() is not None:
                return {"exited": proc.returncode}
            # A host killed earlier leaves its own pid (and ready) behind in the file.
            info = read_json(lock)
            return info if info.get("pid") == proc.pid and info.get("ready") is True else None

        info = wait_for(ready_or_exited, timeout, what=f"host pid {proc.pid} to be ready",
                        interval=0.01, diag=lambda: host.log_text()[-3000:])
        if "exited" in info:
            raise HarnessError(f"host exited {info['exited']} before it was ready:\n"
                               f"{host.log_text()[-3000:]}")
        host.lock = info
        return host

    def background_host(self, *extra: str, pi_args: tuple[str, ...] = (),
                        timeout: float = 60.0) -> dict[str, Any]:
        """``host --background --json`` through the CLI; its JSON. The host is killed
        at clean-up if it still runs."""
        argv = [sys.executable, "-m", "pi_workflows", "host", "--background", "--json",
                "--project", str(self.root), *extra]
        proc = subprocess.run([*argv, "--", *pi_args] if pi_args else argv, env=self.env,
                              capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise HarnessError(f"host --background exited {proc.returncode}: {proc.stderr}")
        info: dict[str, Any] = json.loads(proc.stdout)
        self.adopt(int(info["pid"]))
        return info

    def adopt(self, pid: int) -> None:
        """A host this harness did not spawn itself: killed at clean-up if it still runs."""
        with contextlib.suppress(psutil.Error):
            self.adopted.append((pid, psutil.Process(pid).create_time()))

    def stop_host(self, host: HostProcess, timeout: float = 30.0) -> tuple[float, int | None]:
        """SIGTERM (drain), SIGKILL of its group after ``timeout``: seconds and exit code
        (None when it had to be killed)."""
        begin = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            host.send_signal(signal.SIGTERM)
        try:
            code: int | None = host.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(host.pid, signal.SIGKILL)
            host.wait()
            code = None
        return time.monotonic() - begin, code

    def cleanup(self) -> int:
        """Kill every host still alive and every process carrying this project's marker;
        how many marked processes were killed."""
        # Imported here: the reaper pulls in the supervisor, which only clean-up needs.
        from pi_workflows.protocol.liveness import is_same_process
        from pi_workflows.protocol.settings import project_key
        from pi_workflows.supervisor.host.background import find_host
        from pi_workflows.supervisor.procs.reaper import find_orphans, kill_processes

        for host in self.hosts:
            if host.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(host.pid, signal.SIGKILL)
                host.wait()
        # Background hosts are not our children: kill them by pid, once proven theirs.
        holder = find_host(self.paths)
        others = [(holder.pid, holder.start_time)] if holder is not None else []
        for pid, start in [*self.adopted, *others]:
            if is_same_process(pid, start):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                wait_for(lambda pid=pid, start=start: not is_same_process(pid, start), 10,
                         what=f"background host {pid} to die")
        return int(kill_processes(find_orphans(self.paths.runs_dir, project_key(self.root),
                                               set()), timeout=5))

    # -- reading what happened --

    def row(self, run_id: str) -> QueueRow:
        with self.store() as store:
            row = store.get(run_id)
        assert row is not None, f"no queue row for {run_id}"
        return row

    def state(self, run_id: str) -> dict[str, Any]:
        bundle = Bundle(self.paths.runs_dir, run_id)
        return bundle.state() if bundle.exists() else {}

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """The run's trace (the bundle's events)."""
        return list(Bundle(self.paths.runs_dir, run_id).scan().events)

    def state_processes(self, run_id: str) -> list[dict[str, Any]]:
        """The run's ``processes.json`` entries."""
        return list(Bundle(self.paths.runs_dir, run_id).processes().get("processes", []))

    def lines(self, name: str) -> list[str]:
        path = self.root / name
        return path.read_text().splitlines() if path.exists() else []

    def log_lines(self) -> list[str]:
        """The project's shared log file (every host, worker and CLI of it writes there)."""
        path = self.paths.log_dir / "pi-workflows.log"
        return path.read_text(errors="replace").splitlines() if path.exists() else []

    def release(self, name: str = "release") -> None:
        (self.root / name).write_text("go\n")

    def diagnose(self, runs: list[str]) -> str:
        lines = []
        for run_id in runs:
            row = self.row(run_id)
            state = self.state(run_id)
            lines.append(f"{run_id}: queue={row.state} runner={row.runner_id}"
                         f" state={state.get('status')} node={state.get('currentNode')}")
        for log in sorted(self.root.glob("*.log")):
            lines.append(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}")
        lines.append("--- pi-workflows.log\n" + "\n".join(self.log_lines())[-4000:])
        return "\n".join(lines)


def all_events(store: Store, after: int = 0) -> list[RunEvent]:
    """Every store event with ``seq > after``, paging through ``events_since``."""
    out: list[RunEvent] = []
    while True:
        batch = store.events_since(after, limit=1000)
        if not batch:
            return out
        out.extend(batch)
        after = batch[-1].seq
