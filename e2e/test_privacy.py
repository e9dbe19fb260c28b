"""Private input and secrets never reach logs, the event feed or stored errors."""

from __future__ import annotations

import json

import pytest

from .harness import Project, wait_for

pytestmark = pytest.mark.slow  # real processes: an e2e drill

LEAKY = """
from pi_workflows import define_workflow, compute, edge

def use(ctx):
    return {"length": len(ctx.input["task"])}

def fail(ctx):
    # An author's error message that carries a secret from the input.
    secret = ctx.input["task"]
    raise RuntimeError("upstream said no: api_key=" + secret + " token=" + secret)

workflow = define_workflow(start_at="use", nodes=[compute("use", use), compute("fail", fail)],
                           edges=[edge("use", "fail")])
"""

SECRET = "hunter2-Zq8v-private"


@pytest.mark.timeout(90)
def test_secret_input_stays_out_of_logs_feed_and_errors(project: Project) -> None:
    project.write_workflow("leaky", LEAKY)
    project.start_host()
    run_id = project.detach("leaky", {"task": SECRET})
    wait_for(lambda: project.row(run_id).state == "failed", what="run failed")
    row = project.row(run_id)
    assert SECRET not in (row.error_message or "") and "[redacted]" in (row.error_message or "")
    status = project.cli("status", run_id, "--json").stdout
    assert SECRET not in status and json.loads(status)["errorCode"] == "node_error"
    with project.store() as store:
        feed = json.dumps([e.payload for e in store.events_since(0)])
    assert SECRET not in feed
    logs = [p for p in project.paths.log_dir.glob("*")] + list(project.root.glob("*.log"))
    assert logs
    for log in logs:
        assert SECRET not in log.read_text(errors="replace"), log
    # The queue no longer holds the input once the run started.
    with project.store() as store:
        assert store.get(run_id).has_private_input is False  # type: ignore[union-attr]
