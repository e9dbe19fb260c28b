"""The drill's controller workload (issue 24): its controller and child workflow load, a
reconcile writes each generation once with its ledger line and cleans up on delete, and
the ``controller_worker_kill9`` fault finds the project's controller workers (a
reconciling one first) by marker and title, and nothing else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pi_workflows.protocol.controllers.loading import load_controller_file
from pi_workflows.protocol.definitions.discovery import load_workflow_file
from pi_workflows.protocol.paths import project_key
from pi_workflows.protocol.titles import controller_title
from pi_workflows.protocol.wire import MARKER_ENV, controller_marker, marker_value
from pi_workflows.supervisor.drill.ctlwork import CHILD, SOURCE, busy, controller_workers
from pi_workflows.supervisor.drill.faults import Injector, Planned
from pi_workflows.supervisor.drill.hosts import Hosts
from pi_workflows.supervisor.drill.scratch import Scratch
from pi_workflows.supervisor.drill.workload import Launcher

from tests.helpers.processes import reap


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / ".pi" / "workflows"
    folder.mkdir(parents=True)
    (folder / "ledger.controller.py").write_text(SOURCE)
    (folder / "ctlchild.workflow.py").write_text(CHILD)
    return tmp_path


class Ctx:
    """Just enough of a reconcile context: effects applied at once, children as told."""

    def __init__(self, child_state: str = "done") -> None:
        self.ensured: list[str] = []
        self.outcome: tuple[str, dict[str, Any]] | None = None
        self.finalizer_removed = False
        self.effects = SimpleNamespace(ensure=self._effect)
        self.workflows = SimpleNamespace(ensure=lambda **kw: SimpleNamespace(
            run_id="run-1", state=child_state, finished=child_state != "running"))
        self.settled = lambda patch: self._end("settled", patch)
        self.requeue = lambda patch: self._end("requeue", patch)

    def _effect(self, *, key: str, kind: str, request: Any, observe: Any, apply: Any) -> Any:
        assert observe(request) == "not_applied"
        self.ensured.append(key)
        apply(request)
        assert observe(request) == "applied"
        return SimpleNamespace(state="applied", called=True)

    def _end(self, kind: str, patch: dict[str, Any]) -> None:
        self.outcome = (kind, patch)

    def remove_finalizer(self) -> None:
        self.finalizer_removed = True


def resource(generation: int, spec: dict[str, Any], deleting: bool = False) -> Any:
    meta = SimpleNamespace(key="r1", uid="res-1", generation=generation,
                           deletion_requested=deleting)
    return SimpleNamespace(metadata=meta, spec=spec, status={})


@pytest.mark.timeout(60)
def test_the_drills_controller_and_its_child_workflow_load(project: Path) -> None:
    # A broken one is only refused launches and stuck resources: say it here first.
    folder = project / ".pi" / "workflows"
    assert load_controller_file(folder / "ledger.controller.py").name == "ledger"
    assert load_workflow_file(folder / "ctlchild.workflow.py").name == "ctlchild"


@pytest.mark.timeout(60)
def test_a_reconcile_writes_each_generation_once_and_cleans_up_on_delete(
        project: Path) -> None:
    reconcile = load_controller_file(
        project / ".pi" / "workflows" / "ledger.controller.py").controller.reconcile
    ledger, file = project / "ctl-ledger.txt", project / "ctlfiles" / "r1.txt"
    ctx = Ctx()
    reconcile(ctx, resource(1, {"text": "hi"}))  # the file differs: one write, then again
    assert (ctx.ensured, ctx.outcome and ctx.outcome[0]) == (["write-1"], "requeue")
    assert file.read_text() == "hi" and ledger.read_text() == "ledger r1 write-1 res-1\n"
    ctx = Ctx(child_state="running")
    reconcile(ctx, resource(1, {"text": "hi", "child": True}))  # in sync: the child first
    assert ctx.ensured == [] and ctx.outcome is not None
    assert "observed_generation" not in ctx.outcome[1]  # not observed until the child ends
    ctx = Ctx()
    reconcile(ctx, resource(1, {"text": "hi", "child": True}))
    assert ctx.outcome is not None and ctx.outcome[0] == "settled"
    assert ctx.outcome[1]["observed_generation"] == 1
    assert ctx.outcome[1]["conditions"][0]["status"] == "true"
    ctx = Ctx()
    reconcile(ctx, resource(2, {"text": "hi"}, deleting=True))
    assert ctx.ensured == ["remove-2"] and ctx.finalizer_removed and not file.exists()
    assert ledger.read_text().splitlines()[-1] == "ledger r1 remove-2 res-1"


def test_a_controller_worker_is_busy_while_its_title_names_a_resource() -> None:
    assert busy(controller_title("p-0123", 1, "ledger/r1"))
    assert not busy(controller_title("p-0123", 1))
    assert not busy(controller_title("p-0123", 1, "booting"))
    assert not busy("python -m pi_workflows.worker --controllers 1")  # no title yet


TITLED = """
import sys, time
from pi_workflows.protocol.titles import set_title
set_title(sys.argv[1])
print("ok", flush=True)
time.sleep(60)
"""


def titled(title: str, marker: str) -> subprocess.Popen[bytes]:
    import os

    proc = subprocess.Popen([sys.executable, "-c", TITLED, title, "." * 160],
                            env={**os.environ, MARKER_ENV: marker}, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ok\n"
    return proc


@pytest.mark.timeout(60)
def test_the_fault_kills_a_reconciling_controller_worker_of_the_project_first(
        tmp_path: Path) -> None:
    scratch = Scratch.create(tmp_path / "p", 1)
    key = project_key(scratch.root)
    idle = titled(controller_title(key, 0), controller_marker(key, "runner-1", 0))
    reconciling = titled(controller_title(key, 1, "ledger/r1"),
                         controller_marker(key, "runner-1", 1))
    run_worker = titled(f"pi-workflows worker {key} run-1",
                        marker_value(key, "runner-1", "20261201T120000Z-chain-0000aaaa"))
    elsewhere = titled(controller_title("other-0123", 2, "ledger/r1"),
                       controller_marker("other-0123", "runner-1", 2))
    try:
        assert [pid for pid, _, _ in controller_workers(scratch)] == \
            sorted([idle.pid, reconciling.pid])
        injector = Injector(scratch, Hosts(scratch), Launcher(scratch))
        fault = Planned("controller_worker_kill9", 0.0, 0.0, 1.0)
        target, note = injector._controller_worker_kill9(fault)
        assert (target, note) == (f"controller worker {reconciling.pid}", "#1 ledger/r1")
        assert reconciling.wait(10) == -9
        target, note = injector._controller_worker_kill9(fault)  # only an idle one left
        assert (target, note) == (f"controller worker {idle.pid}", "idle")
        assert idle.wait(10) == -9
        assert run_worker.poll() is None and elsewhere.poll() is None
    finally:
        for proc in (idle, reconciling, run_worker, elsewhere):
            reap(proc)
