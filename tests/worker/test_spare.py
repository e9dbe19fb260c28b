"""The zygote's spare and warm-up, piece by piece, with real sockets and processes.

A spare opens settings and store before it knows its run, and must drop
them when its request hands other settings; it waits for exactly one
request and gives up when the host dies or the zygote lets it go; the
zygote's warm-up leaves nothing open behind it; the zygote carries on
without a spare when out of descriptors, and never waits on a live one. (The spare's life in a
real host is drilled in ``e2e/test_zygote.py``.)
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pi_workflows.protocol.settings import load_settings, resolve_paths
from pi_workflows.protocol.wire import CONFIG_ENV, TOKEN_ENV, ForkRequest
from pi_workflows.protocol.workerconfig import WorkerConfig
from pi_workflows.worker import process, spare, zygote
from pi_workflows.worker.envslot import EnvSlot

from tests.helpers.processes import reap


def _config(tmp_path: Path, **overrides: Any) -> str:
    settings = load_settings(**overrides)
    return WorkerConfig.from_settings(settings, resolve_paths(settings, tmp_path)).to_json()


def _request(config_json: str) -> ForkRequest:
    return ForkRequest("20261201T000000Z-x-0123abcd", "starting", "tok-1", "k/r/run",
                       config_json, os.getpid())


def test_preboot_opens_the_store_its_settings_name(tmp_path: Path) -> None:
    config = _config(tmp_path)
    booted = process.preboot(config)
    assert booted is not None
    try:
        assert booted.config_json == config
        assert booted.store.get("20261201T000000Z-x-0123abcd") is None  # a live connection
        assert booted.settings.paths.store_file.exists()
    finally:
        booted.store.close()


@pytest.mark.parametrize("broken", ["{not json", '{"paths": {}}'])
def test_preboot_leaves_bad_settings_to_the_ordinary_boot(broken: str) -> None:
    assert process.preboot(broken) is None


def test_preboot_leaves_an_unopenable_store_to_the_ordinary_boot(tmp_path: Path) -> None:
    store_dir = tmp_path / "store-is-a-dir"
    store_dir.mkdir()
    assert process.preboot(_config(tmp_path, store_file=store_dir)) is None


@pytest.fixture
def took(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """What ``become_worker`` handed to the worker's life, instead of living it."""
    seen: dict[str, Any] = {}

    def run_worker(args: Any, *, host_pidfd: int | None = None,
                   booted: process.Booted | None = None) -> int:
        seen.update(args=args, host_pidfd=host_pidfd, booted=booted,
                    config=os.environ.get(CONFIG_ENV), token=os.environ.get(TOKEN_ENV))
        return 0

    monkeypatch.setattr(process, "run_worker", run_worker)
    monkeypatch.setenv(CONFIG_ENV, "")  # restored after the test, like the token
    monkeypatch.setenv(TOKEN_ENV, "")
    monkeypatch.delenv(CONFIG_ENV)
    monkeypatch.delenv(TOKEN_ENV)
    yield seen


def _args(tmp_path: Path) -> argparse.Namespace:
    return argparse.Namespace(project=str(tmp_path), runner="host-r")


def test_a_spare_keeps_what_it_booted_when_the_settings_match(
        tmp_path: Path, took: dict[str, Any]) -> None:
    config = _config(tmp_path)
    booted = process.preboot(config)
    assert booted is not None
    markers: list[str] = []
    req = _request(config)
    try:
        assert spare.become_worker(req, _args(tmp_path), markers.append, 7, booted) == 0
        assert took["booted"] is booted and took["config"] is None  # nothing to boot again
        assert took["token"] == "tok-1" and took["host_pidfd"] == 7
        assert markers == ["k/r/run"]
        assert (took["args"].run, took["args"].claim_state) == (req.run_id, "starting")
    finally:
        booted.store.close()


def test_a_spare_boots_again_from_a_request_with_other_settings(
        tmp_path: Path, took: dict[str, Any]) -> None:
    booted = process.preboot(_config(tmp_path))
    assert booted is not None
    other = _config(tmp_path, lease_ms=45_000)
    spare.become_worker(_request(other), _args(tmp_path), lambda _: None, 7, booted)
    assert took["booted"] is None and took["config"] == other
    with pytest.raises(Exception, match="closed"):
        booted.store.get("20261201T000000Z-x-0123abcd")  # its connection was closed


@pytest.fixture
def host() -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in host: a real process whose death the spare must notice."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    reap(proc)


Channel = tuple[socket.socket, socket.socket, int]


@pytest.fixture
def channel(host: subprocess.Popen[bytes]) -> Iterator[Channel]:
    """(the zygote's end, the spare's end, the host's pidfd), closed afterwards."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pidfd = os.pidfd_open(host.pid)
    yield ours, theirs, pidfd
    os.close(pidfd)
    ours.close()
    theirs.close()


def test_the_spare_takes_the_one_request_it_is_sent(tmp_path: Path, channel: Channel) -> None:
    ours, theirs, pidfd = channel
    req = _request(_config(tmp_path))
    ours.sendall(req.encode())
    assert spare.wait_for_run(theirs, pidfd) == req


def test_the_spare_gives_up_when_the_zygote_lets_it_go(channel: Channel) -> None:
    ours, theirs, pidfd = channel
    ours.close()
    assert spare.wait_for_run(theirs, pidfd) is None


def test_the_spare_runs_nothing_for_a_host_that_died(
        tmp_path: Path, host: subprocess.Popen[bytes], channel: Channel) -> None:
    ours, theirs, pidfd = channel
    got: list[ForkRequest | None] = []
    waiter = threading.Thread(target=lambda: got.append(spare.wait_for_run(theirs, pidfd)))
    waiter.start()
    host.kill()
    host.wait()
    waiter.join(10)
    assert got == [None]
    # A request that arrives with the host's death is not served either.
    ours.sendall(_request(_config(tmp_path)).encode())
    assert spare.wait_for_run(theirs, pidfd) is None


def test_the_zygote_warm_up_leaves_nothing_open() -> None:
    code = (
        "import os, sys, threading\n"
        "from pi_workflows.worker import zygote\n"
        "from pi_workflows.protocol.store.db import expected_layout\n"
        "fds = sorted(os.listdir('/proc/self/fd')); mods = set(sys.modules)\n"
        "zygote.warm_up()\n"
        "assert sorted(os.listdir('/proc/self/fd')) == fds, 'a descriptor stayed open'\n"
        "assert threading.active_count() == 1, 'a thread stayed behind'\n"
        "left = [m for m in set(sys.modules) - mods if m.startswith('_pi_workflow_')]\n"
        "assert not left, left\n"
        "assert expected_layout.cache_info().currsize == 1\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@pytest.fixture
def server() -> Iterator[zygote._Server]:
    """A zygote loop over a real control socket (nothing is served in these tests)."""
    ctl, other = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    yield zygote._Server(argparse.Namespace(project="/nonexistent", runner="host-r"),
                         EnvSlot(), -1, ctl, spares=True)
    ctl.close()
    other.close()


def test_a_zygote_out_of_descriptors_carries_on_without_a_spare(
        server: zygote._Server, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fds(*_: Any) -> Any:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(socket, "socketpair", no_fds)
    server._new_spare()  # no exception: the next request forks its worker itself
    assert server.spare is None


@pytest.mark.timeout(30)
def test_a_spare_that_cannot_take_its_request_is_killed_before_it_is_reaped(
        server: zygote._Server) -> None:
    pid = os.posix_spawn("/bin/sleep", ["sleep", "60"], dict(os.environ))  # alive, waiting
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    theirs.close()
    pidfd = os.pidfd_open(pid)
    server.spare = zygote._Spare(pid, pidfd, ours)
    server.poller.register(pidfd)
    assert server._assign(b"{}") is None  # the send fails: no spare to hand it to
    assert server.spare is None and server.spare_deaths == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # killed and reaped, not waited on forever
