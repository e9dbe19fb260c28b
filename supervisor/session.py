"""The terminal session runner: ``pi-workflows run NAME`` owns its run from birth.

Owns running one run attached to a terminal: the run is inserted already
claimed by this session (so it starts here, not in a host), one worker
subprocess executes it, and its trace is shown live. Closing the terminal
(SIGHUP), Ctrl-C or SIGTERM parks the run, and a host resumes it; if this
process is killed, the worker notices (PDEATHSIG) and parks it the same way.
Signal handlers only record. Imports ``protocol`` and supervisor helpers.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from collections.abc import Callable

from ..protocol.bundle import Bundle
from ..protocol.errors import ExitCode
from ..protocol.launch import Prepared
from ..protocol.liveness import host_name, process_start_time
from ..protocol.settings import Paths, Settings, project_key
from ..protocol.states import SETTLED_STATUSES, TERMINAL, UNOWNED, exit_code
from ..protocol.store import Store
from ..protocol.wakeup import poke
from ..protocol.workerconfig import WorkerConfig
from .claims import after_exit, give_back
from .oslayer import OsLayer, RealOs
from .watch import TraceFollower, ended_without_bundle
from .workers import WorkerHandle

POLL_S = 0.05


def run_attached(store: Store, settings: Settings, paths: Paths, prepared: Prepared, *,
                 session: str | None, echo: Callable[[str], None],
                 os_layer: OsLayer | None = None) -> int:
    """Start ``prepared`` in this session, show it live; return the documented exit code."""
    ops = os_layer or RealOs()
    key = project_key(paths.project)
    runner_id = f"session-{host_name()}-{os.getpid()}-{secrets.token_hex(3)}"
    store.register_runner(runner_id, "session", os.getpid(), process_start_time(), host_name())
    stops: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: stops.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        claim = store.insert_and_claim(prepared.run_id, prepared.source, prepared.input,
                                       runner_id, origin_session=session)
        echo(f"run {prepared.run_id} ({prepared.source.workflow}); Ctrl-C parks it for a host")
        worker = ops.spawn_worker(
            claim, project=paths.project, project_key=key, runner_id=runner_id,
            config_json=WorkerConfig.from_settings(settings, paths).to_json(),
            now=time.monotonic())
        follower = TraceFollower(Bundle(paths.runs_dir, prepared.run_id))
        code = _follow(worker, follower, stops, settings, echo)
        for line in follower.lines():
            echo(line)
        if after_exit(store, ops, key, claim, code):
            give_back(store, paths.runs_dir, claim)  # so a host resumes it at once
        return _outcome(store, follower, claim.run_id, paths, echo)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        store.unregister_runner(runner_id)


def _follow(worker: WorkerHandle, follower: TraceFollower, stops: list[int],
            settings: Settings, echo: Callable[[str], None]) -> int:
    """Show the trace until the worker exits; a stop signal asks it to park."""
    asked: float | None = None
    while (code := worker.poll()) is None:
        for line in follower.lines():
            echo(line)
        now = time.monotonic()
        if stops and asked is None:
            echo("parking the run (a host resumes it); press Ctrl-C again to stop at once")
            worker.terminate(now)
            asked = now
        elif asked is not None and (len(stops) > 1 or now - asked > settings.drain_grace_s):
            worker.kill(now)
        time.sleep(POLL_S)
    return int(code)


def _outcome(store: Store, follower: TraceFollower, run_id: str, paths: Paths,
             echo: Callable[[str], None]) -> int:
    row = store.get(run_id)
    if row is None:
        echo(f"run {run_id} is gone; see `pi-workflows list`")
        return ExitCode.PARKED
    status = follower.status()
    code = exit_code(row.state, status)
    if row.state in UNOWNED:
        poke(paths.state_dir)
        echo(f"parked: `pi-workflows host` resumes it; `pi-workflows watch {run_id}` follows it")
    elif row.state in TERMINAL and status not in SETTLED_STATUSES:
        echo(ended_without_bundle(row))
    elif code is None:
        echo(f"run {run_id} is {row.state}; see `pi-workflows status {run_id}`")
        return ExitCode.PARKED
    return ExitCode.PARKED if code is None else code
