"""Workflow source text the e2e drills share, pasted into their workflow files.

Owns ``HOLD``, a node factory ``hold(name)`` whose node records that it
started (``<name>.started`` in the project) and blocks until the test
creates the ``release`` file (or the run is cancelled). Plain strings:
imports nothing, and must never import pytest, a conftest or a test module.
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
