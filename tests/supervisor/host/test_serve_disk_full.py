"""The serving loop outlives a disk-full ``OSError`` that a pass did not expect (item 14).

A real ``HostServer`` around a ``Host`` over the fake OS; its pass is made to
meet ``ENOSPC`` once, as the host's own bundle write did before the fix
(exit 70, on every restart). No real workers, no sleeps in the test.
"""

from __future__ import annotations

import errno
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from pi_workflows.protocol.settings import load_settings, resolve_paths
from pi_workflows.supervisor.host.loop import Host
from pi_workflows.supervisor.host.serve import HostServer

from tests.helpers.clocks import FakeClock
from tests.helpers.fake_os import FakeOs

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(autouse=True)
def _signals_restored() -> Iterator[None]:
    """serve() installs the host's handlers: give pytest its own back afterwards."""
    sigs = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD)
    saved = {sig: signal.getsignal(sig) for sig in sigs}
    yield
    signal.set_wakeup_fd(-1)
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_a_pass_that_meets_a_full_disk_backs_off_and_serves_on(tmp_path: Path) -> None:
    settings = load_settings(poll_interval_s=0.01, lease_ms=10_000, renew_ms=2_000)
    host = Host(resolve_paths(settings, tmp_path), settings, concurrency=1, clock=FakeClock(),
                monotonic=FakeClock(1.0), os_layer=FakeOs(), use_zygote=False)
    passes: list[str] = []
    real = host.loop_once

    def once() -> None:
        passes.append("pass")
        if len(passes) == 1:
            raise OSError(errno.ENOSPC, "No space left on device", "/runs/r1/trace.ndjson")
        real()
        if len(passes) == 3:
            host.request_stop()

    host.loop_once = once  # type: ignore[method-assign]
    assert HostServer(host).serve() == 0  # drained at the third pass, never died
    assert len(passes) == 3
    assert host.disk.full  # it waits for a probe write before claiming again
