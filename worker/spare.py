"""The spare: a worker the zygote forked ahead of time, waiting for its run.

Owns the life of a forked child between its fork and its run: its own
session and random state, its title, the settings and store connection it
opens while it waits (``process.preboot``), and the wait itself, on the
zygote's socket for the one request it will serve and on the host's pidfd.
A spare that sees the host die, or the zygote close its socket, exits
without touching any run. Given its request it becomes the worker a fresh
fork would have been (marker, token, arguments, ``process.run_worker``).
It never reads a second request. Imports ``protocol`` and ``worker.process``.
"""

from __future__ import annotations

import argparse
import os
import random
import select
import socket
from collections.abc import Callable
from pathlib import Path

from ..protocol.definitions import discovery
from ..protocol.paths import project_key
from ..protocol.titles import set_title, spare_title
from ..protocol.wire import CONFIG_ENV, TOKEN_ENV, ForkRequest, forked_worker_args
from . import process

MAX_MESSAGE = 1 << 20


def become_worker(req: ForkRequest, args: argparse.Namespace, write_marker: Callable[[str], object],
                  host_pidfd: int, booted: process.Booted | None = None) -> int:
    """Take the run of ``req``: its marker and token, then the worker's life."""
    write_marker(req.marker)
    if booted is not None and booted.config_json != req.config_json:
        booted.store.close()  # opened from other settings: boot again from the request's
        booted = None
    if booted is None:
        os.environ[CONFIG_ENV] = req.config_json
    os.environ[TOKEN_ENV] = req.token  # popped again by the worker's boot
    worker = forked_worker_args(Path(args.project), args.runner, req.parent_pid,
                                run_id=req.run_id, claim_state=req.claim_state, force=req.force)
    return process.run_worker(worker, host_pidfd=host_pidfd, booted=booted)


def wait_for_run(assign: socket.socket, host_pidfd: int) -> ForkRequest | None:
    """The request this spare serves, or None: the host died or the zygote let it go."""
    poller = select.poll()
    poller.register(assign.fileno(), select.POLLIN)
    poller.register(host_pidfd, select.POLLIN)
    while True:
        ready = {fd for fd, _ in poller.poll()}
        if host_pidfd in ready:
            return None  # a request that came with it has no host to run for
        try:
            data = assign.recv(MAX_MESSAGE)
        except OSError:
            return None
        if not data:
            return None
        return ForkRequest.decode(data)


def run_spare(args: argparse.Namespace, write_marker: Callable[[str], object],
              host_pidfd: int, assign: socket.socket) -> int:
    """A spare's life: boot what no run decides, wait, then run the one it is given."""
    os.setsid()
    random.seed()  # a forked copy of the zygote's generator would repeat its siblings'
    set_title(spare_title(project_key(Path(args.project))))
    # The zygote's environment carries the host's settings (the same a request hands).
    config_json = os.environ.pop(CONFIG_ENV, "")
    booted = process.preboot(config_json) if config_json else None
    # Touched here, the pages a run's workflow load writes to are copied from
    # the zygote's while the spare waits, not after its run is claimed.
    discovery.warm_up()
    req = wait_for_run(assign, host_pidfd)
    assign.close()
    if req is None:
        if booted is not None:
            booted.store.close()
        return 0
    return become_worker(req, args, write_marker, host_pidfd, booted)
