"""The operating system as a runner sees it: start workers, find and kill processes.

Owns the seam between the supervisor's decisions and the real OS. ``OsLayer``
is what the host and the session runner call; ``RealOs`` does it with
subprocesses (cold, or forked by the zygote), process groups and psutil,
and removes the temporary directories dead workers left;
unit tests pass a fake one, so crash loops, drains and hung workers are
driven without real processes.
Imports ``protocol`` and the procs wing's spawning, reaping and
lock-holder modules; never another wing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import psutil

from ...protocol.store import Claim
from ...protocol.tempdirs import sweep_tempdirs
from .lockholders import Holder, bundle_lock_holders
from .reaper import find_orphans, find_run_processes, find_stale_writers, kill_processes
from .workers import WorkerHandle, spawn_worker
from .zygote import Forker, start_zygote


class OsLayer(Protocol):
    def spawn_worker(self, claim: Claim, *, project: Path, project_key: str, runner_id: str,
                     config_json: str, now: float) -> WorkerHandle: ...

    def start_zygote(self, *, project: Path, project_key: str, runner_id: str,
                     config_json: str, spare: bool = True) -> Forker: ...

    def run_processes(self, project_key: str, runner_id: str,
                      run_id: str | None = None) -> list[psutil.Process]: ...

    def orphans(self, runs_dir: Path, project_key: str,
                live_runners: set[str]) -> list[psutil.Process]: ...

    def stale_writers(self, runs_dir: Path, project_key: str, run_id: str,
                      owner: str) -> list[psutil.Process]: ...

    def lock_holders(self, bundle_dir: Path) -> list[Holder]: ...

    def kill(self, procs: list[psutil.Process]) -> int: ...

    def sweep_tempdirs(self) -> int: ...


class RealOs:
    def spawn_worker(self, claim: Claim, *, project: Path, project_key: str, runner_id: str,
                     config_json: str, now: float) -> WorkerHandle:
        return spawn_worker(claim, project=project, project_key=project_key,
                            runner_id=runner_id, config_json=config_json, now=now)

    def start_zygote(self, *, project: Path, project_key: str, runner_id: str,
                     config_json: str, spare: bool = True) -> Forker:
        return start_zygote(project=project, project_key=project_key, runner_id=runner_id,
                            config_json=config_json, spare=spare)

    def run_processes(self, project_key: str, runner_id: str,
                      run_id: str | None = None) -> list[psutil.Process]:
        return find_run_processes(project_key, runner_id, run_id)

    def orphans(self, runs_dir: Path, project_key: str,
                live_runners: set[str]) -> list[psutil.Process]:
        return find_orphans(runs_dir, project_key, live_runners)

    def stale_writers(self, runs_dir: Path, project_key: str, run_id: str,
                      owner: str) -> list[psutil.Process]:
        return find_stale_writers(runs_dir, project_key, run_id, owner)

    def lock_holders(self, bundle_dir: Path) -> list[Holder]:
        return bundle_lock_holders(bundle_dir)

    def kill(self, procs: list[psutil.Process]) -> int:
        return kill_processes(procs)

    def sweep_tempdirs(self) -> int:
        return sweep_tempdirs()
