"""The host's zygote over the fake OS: forks while it lives, cold spawns while it is down.

A fake zygote hands out fake worker processes; the test kills it, and the
host must spawn the next worker cold, restart the zygote only after its
pause, and leave the forked worker's run alone. Real store, no threads.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pi_workflows.protocol.errors import ClaimLost
from pi_workflows.protocol.settings import load_settings, resolve_paths
from pi_workflows.protocol.wire import ForkRequest, WorkerExit
from pi_workflows.supervisor.host.loop import SPAWN_RETRY_S, Host
from pi_workflows.supervisor.procs.zygote import RESTART_PAUSE_S, ForkUncertain, ZygoteFailed

from tests.helpers.clocks import FakeClock
from tests.helpers.fake_os import FakeOs, FakeProc, enqueue


class FakeZygote:
    def __init__(self) -> None:
        self.pid = 3_000_000
        self.dead = False
        self.requests: list[ForkRequest] = []
        self.stopped = False
        self.hangs = False  # reads the request, then never answers

    def alive(self) -> bool:
        return not self.dead

    def fileno(self) -> int | None:
        return None

    def fork(self, request: ForkRequest, timeout: float = 0) -> FakeProc:
        if self.dead:
            raise ZygoteFailed("the zygote is gone")
        self.requests.append(request)
        if self.hangs:
            raise ForkUncertain("the zygote did not answer within 10 s")
        return FakeProc(None)

    def stop(self, timeout: float = 0) -> None:
        self.stopped = True


class ZygoteOs(FakeOs):
    def __init__(self) -> None:
        super().__init__()
        self.zygotes: list[FakeZygote] = []

    def start_zygote(self, **_: Any) -> FakeZygote:
        self.zygotes.append(FakeZygote())
        return self.zygotes[-1]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[tuple[Host, ZygoteOs, FakeClock[float]]]:
    fake_os, mono = ZygoteOs(), FakeClock(1000.0)
    settings = load_settings(lease_ms=60_000, renew_ms=2_000)
    host = Host(resolve_paths(settings, tmp_path), settings, concurrency=4, clock=FakeClock(),
                monotonic=mono, os_layer=fake_os)
    host.start()
    yield host, fake_os, mono
    host.shutdown()


@pytest.mark.timeout(30)
def test_workers_are_forked_with_what_a_cold_spawn_passes(rig: tuple[Host, ZygoteOs,
                                                                     FakeClock[float]]) -> None:
    host, fake_os, _ = rig
    enqueue(host.store, "r1")
    host.loop_once()
    assert len(fake_os.zygotes) == 1 and not fake_os.spawned  # forked, not spawned cold
    (request,) = fake_os.zygotes[0].requests
    claim = host.workers["r1"].claim
    assert (request.run_id, request.token, request.claim_state) == ("r1", claim.token,
                                                                    "starting")
    assert request.marker == f"{host.project_key}/{host.runner_id}/r1"
    assert request.config_json == host.worker_config


@pytest.mark.timeout(30)
def test_a_dead_zygote_means_cold_spawns_until_it_is_restarted_after_a_pause(
        rig: tuple[Host, ZygoteOs, FakeClock[float]]) -> None:
    host, fake_os, mono = rig
    enqueue(host.store, "r1")
    host.loop_once()
    forked = host.workers["r1"]
    fake_os.zygotes[0].dead = True
    enqueue(host.store, "r2")
    host.loop_once()
    assert [h.run_id for h in fake_os.spawned] == ["r2"]  # cold while it is down
    assert len(fake_os.zygotes) == 1 and fake_os.zygotes[0].stopped
    assert host.workers["r1"] is forked and isinstance(forked.proc, FakeProc)
    assert forked.proc.signals == []  # the run in flight is left alone
    mono.advance(RESTART_PAUSE_S)
    enqueue(host.store, "r3")
    host.loop_once()
    assert len(fake_os.zygotes) == 2 and [r.run_id for r in fake_os.zygotes[1].requests] == \
        ["r3"]


@pytest.mark.timeout(30)
def test_an_unknown_exit_is_clean_only_if_the_worker_settled_its_claim(
        rig: tuple[Host, ZygoteOs, FakeClock[float]]) -> None:
    host, _, _ = rig
    enqueue(host.store, "r1")
    host.loop_once()
    proc = host.workers["r1"].proc
    assert isinstance(proc, FakeProc)
    proc.code = WorkerExit.UNKNOWN  # its zygote died before reporting; the claim is still ours
    host.loop_once()
    assert host.crashes.count("r1") == 1 and "r1" in host.pending


@pytest.mark.timeout(30)
def test_an_unanswered_fork_is_retried_under_a_new_token_after_a_marker_sweep(
        rig: tuple[Host, ZygoteOs, FakeClock[float]]) -> None:
    """The zygote read the request and never answered: a worker may run with the token."""
    host, fake_os, mono = rig
    fake_os.zygotes[0].hangs = True
    enqueue(host.store, "r1")
    host.loop_once()
    (request,) = fake_os.zygotes[0].requests
    assert not fake_os.spawned and "r1" not in host.workers  # not started again at once
    assert host.pending["r1"].sweep and fake_os.zygotes[0].stopped
    stray = object()
    fake_os.leftovers = [stray]  # what carries r1's marker by the retry
    mono.advance(SPAWN_RETRY_S)
    host.loop_once()
    assert [stray] in fake_os.kills
    (again,) = fake_os.zygotes[1].requests  # a new zygote, after its pause
    assert again.token == host.workers["r1"].claim.token != request.token
    with pytest.raises(ClaimLost):
        host.store.verify("r1", request.token)  # the stray worker is fenced out
    assert host.store.verify("r1", again.token).run_id == "r1"
