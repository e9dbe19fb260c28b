"""The wire between a runner (host or session) and the worker it starts.

Owns everything both sides of that process boundary must spell the same
way: the worker's command line, the environment names (claim token, handed
settings, run marker), the zygote's command line and the messages on its
control socket (fork requests and exit reports), and the worker's exit
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
# The run id in the zygote's own marker (it forks workers; it runs no run).
ZYGOTE_RUN = "zygote"
# The run id part of a controller worker's marker (``controller-0``, ...).
CONTROLLER_RUN = "controller-"
# Room in the zygote's marker for the longest run id a forked worker writes in
# its place (the environment block cannot grow after exec).
MARKER_ROOM = 160
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
    # The runs directory's filesystem is full (ENOSPC, EDQUOT): not a crash either;
    # the runner backs off and tries again once there is space.
    DISK_FULL = 24
    # Not an exit status (those are 0-255, or minus a signal): a forked worker
    # whose zygote died before reporting it. Clean only if the claim is gone.
    UNKNOWN = 256


# Exits after which a worker holds no claim of ours if it behaved; any other
# exit (or one of these that left the claim behind) is treated as a crash.
CLEAN_EXITS = frozenset({WorkerExit.FINISHED, WorkerExit.PARKED, WorkerExit.CLAIM_LOST,
                         WorkerExit.UNKNOWN})


# Room on the command line for the longest title a forked (or controller) worker
# sets (setproctitle with SPT_NOENV can use only the original command line's bytes).
TITLE_ROOM = "." * 128


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
                claim_state: str | None = None, force: bool = False) -> list[str]:
    """The command line of one worker for ``run_id``."""
    argv = [sys.executable, "-m", WORKER_MODULE, "--project", str(project),
            "--runner", runner_id, "--parent-pid", str(parent_pid)]
    if run_id is None or claim_state is None:
        raise ValueError("a worker for a run needs its run id and claim state")
    argv += ["--run", run_id, "--claim-state", claim_state]
    return [*argv, "--force"] if force else argv




def zygote_argv(project: Path, runner_id: str, parent_pid: int, control_fd: int, *,
                spare: bool = True) -> list[str]:
    """The zygote's command line: the worker package, told to fork workers on request."""
    argv = [sys.executable, "-m", WORKER_MODULE, "--project", str(project), "--runner",
            runner_id, "--parent-pid", str(parent_pid), "--zygote", str(control_fd)]
    return [*argv, *([] if spare else ["--no-spare"]), "--title-room", TITLE_ROOM]


def zygote_marker(project_key: str, runner_id: str) -> str:
    """The zygote's marker, padded so a forked worker can write its own in place."""
    value = marker_value(project_key, runner_id, ZYGOTE_RUN)
    return value + "#" * MARKER_ROOM


def worker_env(marker: str, *, config_json: str = "", token: str | None = None) -> dict[str, str]:
    env = {}
    if config_json:
        env[CONFIG_ENV] = config_json
    if token is not None:
        env[TOKEN_ENV] = token
    env[MARKER_ENV] = marker  # last: the zygote's children rewrite it in place
    return env


def forked_worker_args(project: Path, runner_id: str, parent_pid: int, *, run_id: str,
                       claim_state: str, force: bool = False) -> argparse.Namespace:
    """What ``parse_worker_args(worker_argv(...)[3:])`` returns, without argparse.

    A forked worker gets its arguments from its zygote's request, so building
    and running a parser (about 2 ms of every fork) would only re-read what
    we just wrote; a test holds the two equal.
    """
    state = QueueState(claim_state)
    if state not in CLAIMED:
        raise ValueError(f"a worker runs a claimed run, not a {state} one")
    return argparse.Namespace(project=str(project), run=run_id, runner=runner_id,
                              claim_state=str(state), parent_pid=parent_pid,
                              force=force, zygote=None, no_spare=False, title_room="",
                              controllers=None, workflows_dir=None, global_dir=None)


def parse_worker_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="pi-workflows-worker")
    parser.add_argument("--project", required=True)
    parser.add_argument("--run", help="The claimed run (omit with --zygote).")
    parser.add_argument("--runner", required=True)
    parser.add_argument("--claim-state", default=QueueState.STARTING,
                        choices=[str(s) for s in QueueState if s in CLAIMED])
    parser.add_argument("--parent-pid", type=int, default=None)
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--zygote", type=int, default=None, metavar="FD",
                        help="Fork workers on requests read from this socket.")
    parser.add_argument("--no-spare", action="store_true",
                        help="With --zygote: fork each worker on request, none ahead.")
    parser.add_argument("--title-room", default="", help=argparse.SUPPRESS)
    parser.add_argument("--controllers", type=int, default=None, metavar="SLOT",
                        help="Run reconciles for the project's controllers (worker SLOT).")
    parser.add_argument("--workflows-dir", default=None, help="With --controllers.")
    parser.add_argument("--global-dir", default=None, help="With --controllers.")
    args = parser.parse_args(argv)
    if args.zygote is None and not args.run and args.controllers is None:
        parser.error("--run is required unless --zygote or --controllers is given")
    return args


def controller_argv(project: Path, runner_id: str, parent_pid: int, slot: int, *,
                    workflows_dir: Path, global_dir: Path) -> list[str]:
    """The command line of controller worker ``slot``: it claims reconciles itself."""
    return [sys.executable, "-m", WORKER_MODULE, "--project", str(project), "--runner",
            runner_id, "--parent-pid", str(parent_pid), "--controllers", str(slot),
            "--workflows-dir", str(workflows_dir), "--global-dir", str(global_dir),
            "--title-room", TITLE_ROOM]


def controller_marker(project_key: str, runner_id: str, slot: int) -> str:
    """A controller worker's marker: its run id is ``controller-SLOT``."""
    return marker_value(project_key, runner_id, f"{CONTROLLER_RUN}{slot}")


@dataclass(frozen=True)
class ForkRequest:
    """What a runner sends its zygote for one worker: what a cold spawn passes."""

    run_id: str
    claim_state: str
    token: str
    marker: str
    config_json: str
    parent_pid: int
    force: bool = False

    def encode(self) -> bytes:
        return json.dumps({"run": self.run_id, "claimState": self.claim_state,
                           "token": self.token, "marker": self.marker,
                           "config": self.config_json, "parentPid": self.parent_pid,
                           "force": self.force}).encode()

    @classmethod
    def decode(cls, data: bytes) -> ForkRequest:
        d = json.loads(data)
        return cls(str(d["run"]), str(d["claimState"]), str(d["token"]), str(d["marker"]),
                   str(d["config"]), int(d["parentPid"]), bool(d["force"]))


def forked_message(pid: int | None, error: str = "") -> bytes:
    """The zygote's answer to a fork request (the child's pidfd rides along)."""
    return json.dumps({"forked": pid, "error": error}).encode()


def exit_message(pid: int, code: int) -> bytes:
    """The zygote's report that a worker it forked exited (``Popen.returncode`` style)."""
    return json.dumps({"exit": pid, "code": code}).encode()


def decode_zygote_message(data: bytes) -> dict[str, object]:
    value = json.loads(data)
    if not isinstance(value, dict):
        raise ValueError("a zygote message is a JSON object")
    return value


def controller_booted_file(state_dir: Path, slot: int) -> Path:
    """Where controller worker SLOT writes its pid once its controller files are loaded:
    the host tells a worker that died while loading from one that died later."""
    return Path(state_dir) / "controllers" / f"worker-{slot}.booted"


def controllers_halted_file(state_dir: Path) -> Path:
    """The host's note that it stopped restarting controller workers (a crash loop at
    load), JSON ``{files, crashes, lastExit, at}``; gone once a controller file changes."""
    return Path(state_dir) / "controllers" / "halted.json"
