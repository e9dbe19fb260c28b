"""The operating system as a runner sees it: start workers, find and kill processes.

Owns the seam between the supervisor's decisions and the real OS. ``OsLayer``
is what the host and the session runner call; ``RealOs`` does it with
subprocesses (cold, or forked by the zygote), process groups and psutil,
and removes the temporary directories dead workers left;
unit tests pass a fake one, so crash loops, drains and hung workers are
driven without real processes.
Imports ``protocol`` and the procs wing's spawning, reaping and
lock-holder modules, each (and psutil, and the reaper's loguru) only when
a method first needs it: a session runner that starts one worker and
kills nothing (``activate``, on the way from the model's turn to the run's
first node) loads none of the reaping; never another wing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import psutil

    from ...protocol.store import Claim
    from .lockholders import Holder
    from .workers import WorkerHandle
    from .zygote import Forker


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
    """The real OS; each method imports what it uses when it is first called."""

    def spawn_worker(self, claim: Claim, *, project: Path, project_key: str, runner_id: str,
                     config_json: str, now: float) -> WorkerHandle:
        from .workers import spawn_worker

        return spawn_worker(claim, project=project, project_key=project_key,
                            runner_id=runner_id, config_json=config_json, now=now)

    def start_zygote(self, *, project: Path, project_key: str, runner_id: str,
                     config_json: str, spare: bool = True) -> Forker:
        from .zygote import start_zygote

        return start_zygote(project=project, project_key=project_key, runner_id=runner_id,
                            config_json=config_json, spare=spare)

    def run_processes(self, project_key: str, runner_id: str,
                      run_id: str | None = None) -> list[psutil.Process]:
        from .reaper import find_run_processes

        return find_run_processes(project_key, runner_id, run_id)

    def orphans(self, runs_dir: Path, project_key: str,
                live_runners: set[str]) -> list[psutil.Process]:
        from .reaper import find_orphans

        return find_orphans(runs_dir, project_key, live_runners)

    def stale_writers(self, runs_dir: Path, project_key: str, run_id: str,
                      owner: str) -> list[psutil.Process]:
        from .reaper import find_stale_writers

        return find_stale_writers(runs_dir, project_key, run_id, owner)

    def lock_holders(self, bundle_dir: Path) -> list[Holder]:
        from .lockholders import bundle_lock_holders

        return bundle_lock_holders(bundle_dir)

    def kill(self, procs: list[psutil.Process]) -> int:
        from .reaper import kill_processes

        return kill_processes(procs)

    def sweep_tempdirs(self) -> int:
        from ...protocol.tempdirs import sweep_tempdirs

        return sweep_tempdirs()
