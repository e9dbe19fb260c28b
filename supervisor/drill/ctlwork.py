"""The drill's controller workload: the controller it writes, its launches, its workers.

Owns the ``ledger`` controller (written to the scratch project beside the
workflows, with its child workflow ``ctlchild``): it keeps a file
``ctlfiles/KEY.txt`` per resource in sync with the spec's ``text`` through
one guarded effect per generation, whose ``apply`` writes the file and
then appends one line ``ledger KEY EFFECT-KEY UID`` to ``ctl-ledger.txt``
(outside the store, so a repeated applied effect shows as a second line),
and whose ``observe`` looks for that very line; with ``child`` in the spec
it runs ``ctlchild`` once per generation before it says Ready; a delete
removes the file (an effect too) and then its finalizer. Also the
controller launches (``controller apply|delete|reconcile`` through the CLI,
drawn from a random stream of their own) and finding the live controller
workers of the project by their marker and title (for the
``controller_worker_kill9`` fault). Imports ``protocol`` and the drill's
scratch and durable; never the worker.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections import Counter
from dataclasses import dataclass, field

import psutil

from ...protocol.paths import project_key
from ...protocol.spawn import PIPE, TimeoutExpired
from ...protocol.wire import CONTROLLER_RUN, MARKER_ENV, parse_marker
from .durable import CONTROLLER, CONTROLLER_CHILD
from .scratch import Scratch, write_private

SOURCE = '''
import os
import time
from pathlib import Path

from pi_workflows import define_controller

# The project: this file is PROJECT/.pi/workflows/ledger.controller.py.
PROJECT = Path(__file__).resolve().parents[2]
FILES, LEDGER = PROJECT / "ctlfiles", PROJECT / "ctl-ledger.txt"


def in_ledger(line):
    try:
        return line in LEDGER.read_text().splitlines()
    except FileNotFoundError:
        return False


def append(line):
    # One write(2) of one short line with O_APPEND: whole or not at all.
    fd = os.open(LEDGER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, (line + "\\n").encode())
    finally:
        os.close(fd)


def observe(request):
    # Exact: the ledger line is the last thing apply does.
    return "applied" if in_ledger(request["line"]) else "not_applied"


def write(request):
    time.sleep(0.15)  # so a kill lands inside apply now and then
    FILES.mkdir(mode=0o700, exist_ok=True)
    path = FILES / request["file"]
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(request["text"])
    os.replace(tmp, path)
    append(request["line"])
    return {"bytes": len(request["text"])}


def remove(request):
    time.sleep(0.1)
    with __import__("contextlib").suppress(FileNotFoundError):
        (FILES / request["file"]).unlink()
    append(request["line"])
    return {"removed": request["file"]}


def ready(status, reason, message=""):
    return {"type": "Ready", "status": status, "reason": reason, "message": message}


def ensure(ctx, resource, key, request, apply):
    meta = resource.metadata
    line = f"ledger {meta.key} {key} {meta.uid}"
    return ctx.effects.ensure(key=key, kind="file", request={**request, "line": line},
                              observe=observe, apply=apply)


def reconcile(ctx, resource):
    meta, spec = resource.metadata, resource.spec
    gen, name = meta.generation, f"{meta.key}.txt"
    if meta.deletion_requested:
        ensure(ctx, resource, f"remove-{gen}", {"file": name}, remove)
        ctx.remove_finalizer()
        ctx.settled({"conditions": [ready("false", "Deleted")]})
        return
    text = str(spec.get("text", ""))
    try:
        current = (FILES / name).read_text()
    except FileNotFoundError:
        current = None
    if current != text:
        result = ensure(ctx, resource, f"write-{gen}", {"file": name, "text": text}, write)
        if result.state != "applied" or not result.called:
            # Indeterminate or rejected, or applied before and the file differs again:
            # nothing in the drill changes the file, so the checker wants to hear of it.
            ctx.settled({"observed_generation": gen, "conditions": [
                ready("false", "WriteFailed" if result.state != "applied" else "Drifted",
                      result.state)]})
            return
        ctx.requeue({"conditions": [ready("false", "Written", name)]})
        return
    patch = {}
    if spec.get("child"):
        child = ctx.workflows.ensure(request_key=f"child-{gen}", workflow="ctlchild",
                                     input={"key": meta.key, "generation": gen})
        patch["workflow_run"] = child.run_id
        if not child.finished:  # its end queues this resource again
            ctx.settled({**patch, "conditions": [ready("false", "Reporting", child.run_id)]})
            return
        if child.state != "done":
            ctx.settled({**patch, "observed_generation": gen, "conditions": [
                ready("false", "ChildFailed", child.state)]})
            return
    ctx.settled({**patch, "observed_generation": gen,
                 "controller_status": {"text": text},
                 "conditions": [ready("true", "InSync", name)]})


controller = define_controller(name="ledger", initial_status=lambda spec: {"text": None},
                               reconcile=reconcile, timeout=20)
'''
CHILD = '''
import time
from pi_workflows import compute, define_workflow


def pause(ctx):
    end = time.monotonic() + 0.4
    while time.monotonic() < end and not ctx.cancelled():
        time.sleep(0.02)
    return {"key": ctx.input["key"], "generation": ctx.input["generation"]}


workflow = define_workflow(start_at="work", nodes=[compute("work", pause)])
'''
KEYS = tuple(f"r{i}" for i in range(6))
WORDS = ("alpha", "beta", "gamma", "delta")


def write_controllers(scratch: Scratch) -> None:
    """The controller file and its child workflow, beside the drill's workflows."""
    folder = scratch.root / ".pi" / "workflows"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_private(folder / f"{CONTROLLER}.controller.py", SOURCE)
    write_private(folder / f"{CONTROLLER_CHILD}.workflow.py", CHILD)


@dataclass
class CtlLauncher:
    """Applies, changes, deletes and nudges the drill's resources through the CLI."""

    scratch: Scratch
    launches: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    applied: set[str] = field(default_factory=set)  # keys applied (perhaps deleted since)

    def _cli(self, *args: str, timeout: float = 60) -> tuple[int, str]:
        proc = self.scratch.spawn("controller", *args, stdout=PIPE)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        return proc.returncode, out.decode(errors="replace")

    def _do(self, what: str, *args: str) -> bool:
        code, _ = self._cli(*args)
        (self.launches if code == 0 else self.refused)[f"controller:{what}" if code == 0
                                                      else f"controller:{what}:{code}"] += 1
        return code == 0

    def apply(self, key: str, spec: dict[str, object]) -> bool:
        done = self._do("apply", "apply", CONTROLLER, key, "--spec-json", json.dumps(spec),
                        "--json")
        if done:
            self.applied.add(key)
        return done

    def launch(self, rng: random.Random) -> None:
        """An iteration's controller work: an apply (a new resource or a new spec) most
        of the time, sometimes a delete or a reconcile nudge of a key applied before (it
        may be gone: the CLI refuses then, and the report counts it)."""
        for _ in range(rng.choice((0, 1, 1, 2))):
            spec = {"text": f"{rng.choice(WORDS)} {rng.randrange(1000)}",
                    "child": rng.random() < 0.4}
            self.apply(rng.choice(KEYS), spec)
        known = sorted(self.applied)
        if known and rng.random() < 0.2:
            self._do("delete", "delete", CONTROLLER, rng.choice(known), "--json")
        if known and rng.random() < 0.25:
            self._do("reconcile", "reconcile", CONTROLLER, rng.choice(known), "--json")


def controller_workers(project: Scratch) -> list[tuple[int, float, str]]:
    """(pid, start time, title) of the project's live controller workers, by pid: a
    process whose run marker names this project and a ``controller-SLOT`` run."""
    key, out = project_key(project.root), []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            found = parse_marker(proc.environ().get(MARKER_ENV), key)
            if found is None or not found[1].startswith(CONTROLLER_RUN) \
                    or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            out.append((proc.pid, proc.create_time(), " ".join(proc.cmdline()).strip()))
    return sorted(out)


def busy(title: str) -> bool:
    """A controller worker's title names the controller/key it reconciles, else idle
    (one booting, or that has not set its title yet, shows that or its command line)."""
    return title.startswith("pi-workflows controller ") \
        and not title.endswith((" idle", " booting"))
