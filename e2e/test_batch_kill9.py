"""A kill -9 of the worker in the middle of a command batch, with real processes.

The batch is part of its action's guarded effect: the resumed run fails
``effect_indeterminate`` when the action is not idempotent and runs the whole
batch again when it is; either way no item process (nor what it started in its
group) outlives the dead worker for long: the host kills them before it reruns
anything.
"""

from __future__ import annotations

import os
import signal

import pytest

from .harness import Project, alive, wait_for

pytestmark = pytest.mark.slow  # real processes: an e2e drill

# The first run's items block (a child in the item's group, then the item itself, both
# recorded); once `go` exists, an item only says so.
BATCH = """
from pi_workflows import action, compute, define_workflow, edge, run_command_batch

ITEM = ("echo start >> ledger; if [ -e go ]; then echo done; else"
        " sleep 300 & echo $! >> kids; echo $$ >> pids; wait; fi")

def batch(ctx):
    return [r["stdout"] for r in run_command_batch([ITEM] * 4, concurrency=2)]

workflow = define_workflow(
    start_at="batch",
    nodes=[action("batch", batch, idempotent={idempotent}),
           compute("after", lambda ctx: {{"said": ctx.outputs["batch"]}})],
    edges=[edge("batch", "after")],
)
"""


def _kill_mid_batch(project: Project, idempotent: bool) -> tuple[str, list[int]]:
    project.write_workflow("batch", BATCH.format(idempotent=idempotent))
    project.start_host()
    run_id = project.detach("batch")
    wait_for(lambda: len(project.lines("pids")) == 2 and len(project.lines("kids")) == 2,
             timeout=30, what="two items running", diag=lambda: project.diagnose([run_id]))
    items = [int(p) for p in project.lines("pids") + project.lines("kids")]
    worker = next(p for p in project.state_processes(run_id) if p["role"] == "worker")
    project.release("go")  # a rerun's items finish at once
    os.kill(worker["pid"], signal.SIGKILL)
    for pid in items:
        wait_for(lambda pid=pid: not alive(pid), timeout=20, what=f"item process {pid} gone")
    return run_id, items


@pytest.mark.timeout(120)
def test_a_kill_mid_batch_leaves_a_non_idempotent_action_indeterminate(
        project: Project) -> None:
    run_id, _ = _kill_mid_batch(project, idempotent=False)
    wait_for(lambda: project.row(run_id).state == "failed", timeout=60,
             what="the resumed run to fail", diag=lambda: project.diagnose([run_id]))
    assert project.row(run_id).error_code == "effect_indeterminate"
    assert project.lines("ledger") == ["start", "start"]  # never run again
    assert len(project.lines("pids")) == 2


@pytest.mark.timeout(120)
def test_a_kill_mid_batch_reruns_an_idempotent_action_whole(project: Project) -> None:
    run_id, _ = _kill_mid_batch(project, idempotent=True)
    wait_for(lambda: project.row(run_id).state == "done", timeout=60,
             what="the resumed run to finish", diag=lambda: project.diagnose([run_id]))
    assert project.state(run_id)["finalOutput"] == {"said": ["done\n"] * 4}
    assert project.lines("ledger") == ["start"] * 6  # two killed, then all four again
    assert len(project.lines("pids")) == 2
