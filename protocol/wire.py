"""The wire between a runner (host or session) and the worker it starts.

Owns everything both sides of that process boundary must spell the same
way: the worker's command line, the environment names (claim token, handed
settings, run marker), the standby hand-off line, and the worker's exit
codes. A runner builds with these functions and a worker parses with them;
neither side spells a name of its own. Imports only ``protocol.states``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from .states import CLAIMED, QueueState

WORKER_MODULE = "pi_workflows.worker"
# The claim token: read once and removed, so no shell command or agent inherits it.
TOKEN_ENV = "PI_WORKFLOWS_CLAIM_TOKEN"
# The runner's resolved settings as JSON (``protocol.workerconfig``): no pydantic at boot.
CONFIG_ENV = "PI_WORKFLOWS_WORKER_CONFIG"
# ``<project key>/<runner id>/<run id>``: inherited by every descendant, so orphan
# reaping finds even processes that left the worker's group and session.
MARKER_ENV = "PI_WORKFLOWS_MARKER"
# The run id a standby worker's marker carries until it is handed a claim.
STANDBY_RUN = "standby"
# A graceful stop gives a running effect the drain grace to finish; the worker then
# needs a moment to record it and park before its runner kills it: a command that
# ignores SIGTERM gets the worker's 2 s stop grace, its pipes 2 s more, then the park.
PARK_MARGIN_S = 5.0
# "Look at the store now" (``cancel`` sends it to the run's worker): the worker
# renews at once and so learns of a cancel request without waiting a renewal.
NUDGE_SIGNAL = signal.SIGUSR1


class WorkerExit(IntEnum):
    """Exit codes of a worker subprocess, read by the runner that started it."""

    FINISHED = 0
    CRASHED = 1
    PARKED = 20
    CLAIM_LOST = 21
    BOOT_ERROR = 22
    BUNDLE_LOCKED = 23  # another process held the run's lock: not this worker's crash


# Exits after which a worker holds no claim of ours if it behaved; any other
# exit (or one of these that left the claim behind) is treated as a crash.
CLEAN_EXITS = frozenset({WorkerExit.FINISHED, WorkerExit.PARKED, WorkerExit.CLAIM_LOST})


def marker_value(project_key: str, runner_id: str, run_id: str) -> str:
    return f"{project_key}/{runner_id}/{run_id}"


def parse_marker(value: str | None, project_key: str) -> tuple[str, str] | None:
    """(runner id, run id) of a marker that belongs to ``project_key``, else None."""
    if not value:
        return None
    key, _, rest = value.partition("/")
    runner, _, run = rest.partition("/")
    if key != project_key or not runner:
        return None
    return runner, run


def worker_argv(project: Path, runner_id: str, parent_pid: int, *, run_id: str | None = None,
                claim_state: str | None = None, standby: bool = False,
                force: bool = False) -> list[str]:
    """The command line of one worker (``run_id``) or of a standby one."""
    argv = [sys.executable, "-m", WORKER_MODULE, "--project", str(project),
            "--runner", runner_id, "--parent-pid", str(parent_pid)]
    if standby:
        return [*argv, "--standby"]
    if run_id is None or claim_state is None:
        raise ValueError("a worker for a run needs its run id and claim state")
    argv += ["--run", run_id, "--claim-state", claim_state]
    return [*argv, "--force"] if force else argv


def worker_env(marker: str, *, config_json: str = "", token: str | None = None) -> dict[str, str]:
    env = {MARKER_ENV: marker}
    if config_json:
        env[CONFIG_ENV] = config_json
    if token is not None:
        env[TOKEN_ENV] = token
    return env


def parse_worker_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="pi-workflows-worker")
    parser.add_argument("--project", required=True)
    parser.add_argument("--run", help="The claimed run (omit with --standby).")
    parser.add_argument("--runner", required=True)
    parser.add_argument("--claim-state", default=QueueState.STARTING,
                        choices=[str(s) for s in QueueState if s in CLAIMED])
    parser.add_argument("--parent-pid", type=int, default=None)
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--standby", action="store_true",
                        help="Boot, then wait for one assignment line on stdin.")
    args = parser.parse_args(argv)
    if not args.standby and not args.run:
        parser.error("--run is required unless --standby is given")
    return args


@dataclass(frozen=True)
class Assignment:
    """The one line a runner writes to a booted standby worker's stdin."""

    run_id: str
    claim_state: str
    token: str

    def encode(self) -> bytes:
        return json.dumps({"run": self.run_id, "claimState": self.claim_state,
                           "token": self.token}).encode() + b"\n"

    @classmethod
    def decode(cls, line: str) -> Assignment | None:
        """None for an empty line: EOF means the runner does not need this standby."""
        if not line.strip():
            return None
        data = json.loads(line)
        return cls(str(data["run"]), str(data["claimState"]), str(data["token"]))
