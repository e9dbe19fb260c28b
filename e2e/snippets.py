"""Workflow source text the e2e drills share, pasted into their workflow files.

Owns ``HOLD``, a node factory ``hold(name)`` whose node records that it
started (``<name>.started`` in the project) and blocks until the test
creates the ``release`` file (or the run is cancelled); ``REVIEW``, a
draft -> checkpoint -> publish workflow; ``ONE_NODE``, a workflow of one
compute node; ``GATE_CONTROLLER``, a controller that settles a resource Ready at
once. Plain strings: imports nothing, and must never import pytest,
a conftest or a test module.
"""

from __future__ import annotations

HOLD = """
def hold(name):
    # Block the node until the test creates the release file.
    def fn(ctx):
        import pathlib, time
        root = ctx.project_dir
        with open(root / f"{name}.started", "a") as fh:
            fh.write(ctx.attempt_id + "\\n")
        while not (root / "release").exists():
            if ctx.cancelled():
                raise RuntimeError("stopped")
            time.sleep(0.02)
        return {"held": name}
    return fn
"""

# first (once), a held step, last (once): what a takeover must not repeat.
ONCE_HELD = HOLD + """
from pi_workflows import define_workflow, compute, shell, edge

workflow = define_workflow(
    start_at="first",
    nodes=[
        shell("first", "echo once >> first.txt"),
        compute("hold", hold("hold")),
        shell("last", "echo once >> last.txt"),
    ],
    edges=[edge("first", "hold"), edge("hold", "last")],
)
"""

REVIEW = """
from pi_workflows import define_workflow, compute, checkpoint, edge

workflow = define_workflow(
    start_at="draft",
    nodes=[
        compute("draft", lambda ctx: {"text": "v1 of " + ctx.input["task"]}),
        checkpoint("approve", summary=lambda ctx: "approve " + ctx.outputs["draft"]["text"] + "?"),
        compute("publish", lambda ctx: {"published": ctx.outputs["draft"]["text"],
                                        "answer": ctx.outputs["approve"]}),
    ],
    edges=[edge("draft", "approve"), edge("approve", "publish")],
)
"""

ONE_NODE = """
from pi_workflows import define_workflow, compute
workflow = define_workflow(start_at="one", nodes=[compute("one", lambda ctx: {"ok": 1})])
"""


# A controller that settles each resource Ready at once (``Done``, "n=<spec n>") and
# removes its finalizer on deletion: the controller e2e tests' smallest real one.
GATE_CONTROLLER = '''
from pi_workflows import define_controller

def reconcile(ctx, resource):
    if resource.metadata.deletion_requested:
        ctx.remove_finalizer()
        ctx.settled()
        return
    ctx.settled({"conditions": [{"type": "Ready", "status": "true", "reason": "Done",
                                 "message": "n=" + str(resource.spec.get("n"))}]})

controller = define_controller(name="gate", initial_status=lambda spec: {}, reconcile=reconcile)
'''
