"""The host's controller step: N workers while a controller file exists, restarts, the feed."""

from __future__ import annotations

import signal
from types import SimpleNamespace

import pytest
from pi_workflows.protocol.settingspec import defaults
from pi_workflows.protocol.store import Store
from pi_workflows.supervisor.host.controllers import ControllerWorkers

pytestmark = pytest.mark.timeout(30)


class FakeProc:
    pids = iter(range(1000, 2000))

    def __init__(self) -> None:
        self.pid = next(self.pids)
        self.code: int | None = None
        self.signals: list[int] = []

    def poll(self):
        return self.code

    def wait(self, timeout=None):
        return self.code or 0

    def send(self, sig):
        self.signals.append(sig)
        if sig == signal.SIGTERM:
            self.code = 0
        return True

    def send_group(self, sig):
        self.signals.append(sig)
        return True


@pytest.fixture
def env(tmp_path):
    local = tmp_path / "proj" / ".pi" / "workflows"
    local.mkdir(parents=True)
    settings = defaults()
    settings.global_workflows_dir = tmp_path / "global"  # type: ignore[misc]
    settings.controller_workers = 2  # type: ignore[misc]
    settings.restart_backoff_s = 1.0  # type: ignore[misc]
    clock = SimpleNamespace(now=100.0)
    spawned: list[tuple[int, FakeProc]] = []

    def spawn(slot):
        proc = FakeProc()
        spawned.append((slot, proc))
        return proc

    store = Store(tmp_path / "store.sqlite")
    workers = ControllerWorkers(store=store, settings=settings, project=tmp_path / "proj",
                                project_key="k", runner_id="host-x", config_json="",
                                monotonic=lambda: clock.now, spawn=spawn)
    yield SimpleNamespace(workers=workers, local=local, clock=clock, spawned=spawned)
    store.close()


def test_no_controller_file_no_worker(env):
    env.workers.step(False)
    assert env.spawned == []


def test_n_workers_while_a_file_exists_and_a_crash_is_restarted_after_backoff(env):
    (env.local / "a.controller.py").write_text("")
    env.workers.step(False)
    assert [slot for slot, _ in env.spawned] == [0, 1]
    env.spawned[0][1].code = 1  # crashed
    env.workers.step(False)
    assert len(env.spawned) == 2  # not before its backoff
    env.clock.now += 1.0
    env.workers.step(False)
    assert [slot for slot, _ in env.spawned] == [0, 1, 0]


def test_stopping_terminates_them_and_starts_none(env):
    (env.local / "a.controller.py").write_text("")
    env.workers.step(False)
    env.workers.step(True)
    assert all(signal.SIGTERM in proc.signals for _, proc in env.spawned)
    env.workers.step(True)
    assert env.workers.alive() == 0 and len(env.spawned) == 2


def test_a_changed_file_restarts_the_workers(env):
    path = env.local / "a.controller.py"
    path.write_text("")
    env.workers.step(False)
    path.write_text("# changed")
    import os
    os.utime(path, (1, 1))
    env.clock.now += 3
    env.workers.step(False)  # TERM to both
    env.workers.step(False)  # reaped, started again
    assert len(env.spawned) == 4


def test_a_write_nudges_every_worker_also_one_just_started(env, tmp_path):
    from pi_workflows.protocol.wire import NUDGE_SIGNAL

    (env.local / "a.controller.py").write_text("")
    env.workers.step(False)
    env.workers.step(False)  # nothing new: no nudge
    assert all(NUDGE_SIGNAL not in p.signals for _, p in env.spawned)
    env.workers.store.apply_spec("a", "k", {})
    env.workers.step(False)  # just started, nudged all the same (it ignores it while booting)
    assert env.spawned and all(NUDGE_SIGNAL in p.signals for _, p in env.spawned)


def test_a_controller_worker_starts_with_the_nudge_ignored(tmp_path):
    """Started by the real spawn: a nudge that comes before the worker's handler
    is dropped (SIG_IGN survives exec), not the end of the worker."""
    import signal
    import sys

    from pi_workflows.protocol.spawn import PIPE, spawn
    from pi_workflows.protocol.wire import NUDGE_SIGNAL

    code = (f"import signal, sys; print(signal.getsignal({int(NUDGE_SIGNAL)}) =="
            " signal.SIG_IGN, flush=True); sys.stdin.read()")
    for ignore, survives in (((NUDGE_SIGNAL,), True), ((), False)):
        proc = spawn([sys.executable, "-c", code], stdin=PIPE, stdout=PIPE,
                     ignore_signals=ignore)
        assert proc.stdout is not None and proc.stdin is not None
        line = proc.stdout.readline().decode().strip()
        proc.send_signal(NUDGE_SIGNAL)
        proc.stdin.close()
        code_ = proc.wait(timeout=30)
        assert line == str(survives)
        assert (code_ == 0) is survives, code_
        if not survives:
            assert code_ == -signal.SIGUSR1


def test_workers_dying_at_load_stop_restarting_until_a_file_changes(env, tmp_path):
    import json

    from pi_workflows.protocol.wire import controller_booted_file, controllers_halted_file

    state = tmp_path / "state"
    env.workers.state_dir = state
    ctl = env.local / "a.controller.py"
    ctl.write_text("")
    env.workers.step(False)
    # One worker got past loading (its pid noted), then crashed: not a load crash.
    booted = controller_booted_file(state, 1)
    booted.parent.mkdir(parents=True)
    booted.write_text(str(env.spawned[1][1].pid))
    env.spawned[1][1].code = 1
    for _ in range(3):  # crash_limit (3) deaths before loading
        assert not controllers_halted_file(state).exists()
        alive = [p for _, p in env.spawned if p.code is None]
        alive[0].code = 7
        env.workers.step(False)  # reaped
        env.clock.now += 31.0
        env.workers.step(False)  # restarted (until halted)
    note = json.loads(controllers_halted_file(state).read_text())
    assert note["crashes"] == 3 and note["lastExit"] == 7
    assert note["files"] == [str(ctl)]
    count = len(env.spawned)
    for p in [p for _, p in env.spawned if p.code is None]:
        p.code = 7
    env.clock.now += 100.0
    env.workers.step(False)
    assert len(env.spawned) == count  # halted: nothing restarted
    ctl.write_text("# fixed")
    import os
    os.utime(ctl, (1, 1))
    env.clock.now += 3.0
    env.workers.step(False)
    assert not controllers_halted_file(state).exists()
    assert len(env.spawned) == count + 2


def test_the_host_starts_controller_workers_with_the_nudge_ignored(monkeypatch, tmp_path):
    from pi_workflows.protocol.wire import NUDGE_SIGNAL
    from pi_workflows.supervisor.procs import ctlworkers

    seen: dict[str, object] = {}

    def fake_spawn(argv, **kwargs):
        seen.update(kwargs)
        raise OSError("not started here")

    monkeypatch.setattr(ctlworkers, "spawn", fake_spawn)
    import pytest

    with pytest.raises(OSError):
        ctlworkers.spawn_controller_worker(0, project=tmp_path, project_key="p-1",
                                           runner_id="host-1", dirs=(tmp_path, tmp_path))
    assert NUDGE_SIGNAL in seen["ignore_signals"]  # type: ignore[operator]
