"""One reconcile in the controller worker, against the real store.

``reconcile_one`` with a claimed key: finalizer, effect and status written
by token, errors backed off, deletion through the finalizer; every branch of
``effects.ensure`` through ``ClaimedPort``; ``workflows.ensure`` reserving a
run id before queueing it, and a new attempt after an interrupted one.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pi_workflows import define_controller
from pi_workflows.protocol.controllers.context import ReconcileContext
from pi_workflows.protocol.controllers.define import resource_view
from pi_workflows.protocol.controllers.loading import LoadedController
from pi_workflows.protocol.errors import ConflictError
from pi_workflows.protocol.store import Store
from pi_workflows.protocol.store.controllers import Deleted
from pi_workflows.worker.controllers import reconcile_one
from pi_workflows.worker.ctlport import ClaimedPort

pytestmark = pytest.mark.timeout(60)

WORKFLOW = """
from pi_workflows import compute, define_workflow
workflow = define_workflow(start_at="a", nodes=[compute("a", lambda ctx: {"ok": True})])
"""


@pytest.fixture
def env(tmp_path):
    store = Store(tmp_path / "store.sqlite", lease_ms=5000)
    cfg = SimpleNamespace(paths=SimpleNamespace(store_file=tmp_path / "store.sqlite"),
                          lease_ms=5000, busy_timeout_ms=5000, sqlite_synchronous="NORMAL")
    wf = tmp_path / "wf"
    wf.mkdir()
    (wf / "report.workflow.py").write_text(WORKFLOW)
    yield SimpleNamespace(store=store, cfg=cfg, dirs=(wf, tmp_path / "global"), tmp=tmp_path)
    store.close()


def _loaded(reconcile, timeout=10.0):
    return LoadedController(define_controller(name="files", initial_status=lambda s: {},
                                              reconcile=reconcile, timeout=timeout), "p", "s")


def _run(env, reconcile, key="a"):
    claim = env.store.claim_reconcile(["files"], "host-test", 5000)
    assert claim is not None and claim.key == key
    return reconcile_one(env.store, env.cfg, claim, _loaded(reconcile), env.dirs)


def test_a_reconcile_writes_its_finalizer_effect_and_status(env):
    env.store.apply_spec("files", "a", {"text": "hi"})
    target = env.tmp / "out.txt"
    applied = []

    def reconcile(ctx, r):
        res = ctx.effects.ensure(
            key=f"write-{r.metadata.generation}", kind="file", request=dict(r.spec),
            observe=lambda req: "applied" if target.exists() else "not_applied",
            apply=lambda req: applied.append(req) or target.write_text(req["text"]))
        ctx.settled({"observed_generation": r.metadata.generation,
                     "conditions": [{"type": "Ready", "status": "true", "reason": res.state}]})

    assert _run(env, reconcile) == "settled"
    row = env.store.get_resource("files", "a")
    assert row.finalizers == ("files",) and row.status["observed_generation"] == 1
    assert row.status["conditions"][0]["reason"] == "applied"
    assert target.read_text() == "hi" and len(applied) == 1
    assert env.store.queue_entry("files", "a") is None
    effects = env.store.reconcile_effects("files", "a")
    assert [(e.effect_key, e.state) for e in effects] == [("write-1", "applied")]


def test_an_exception_requeues_with_backoff(env):
    env.store.apply_spec("files", "a", {})

    def reconcile(ctx, r):
        raise RuntimeError("boom")

    assert _run(env, reconcile) == "error"
    entry = env.store.queue_entry("files", "a")
    assert entry.attempts == 1 and "RuntimeError: boom" in entry.last_error


def test_returning_without_an_outcome_is_an_error(env):
    env.store.apply_spec("files", "a", {})
    assert _run(env, lambda ctx, r: None) == "error"
    assert "without ending" in env.store.queue_entry("files", "a").last_error


def test_delete_waits_for_the_controllers_cleanup(env):
    env.store.apply_spec("files", "a", {})
    _run(env, lambda ctx, r: ctx.settled())
    assert not isinstance(env.store.request_delete("files", "a"), Deleted)
    seen = []

    def reconcile(ctx, r):
        seen.append(r.metadata.deletion_requested)
        ctx.remove_finalizer()
        ctx.settled()

    _run(env, reconcile)
    assert seen == [True] and env.store.get_resource("files", "a") is None


def _port(env):
    env.store.apply_spec("files", "a", {"x": 1})
    claim = env.store.claim_reconcile(["files"], "host-test", 5000)
    port = ClaimedPort(env.store, controller="files", key="a", token=claim.token, dirs=env.dirs)
    res = claim.resource
    return port, resource_view(res.metadata(), res.spec, res.status)


class Calls:
    def __init__(self, seen="not_applied", fail=None):
        self.observed = self.applied = 0
        self.seen, self.fail = seen, fail

    def observe(self, request):
        self.observed += 1
        return self.seen

    def apply(self, request):
        self.applied += 1
        if self.fail:
            raise self.fail
        return "done"


def _ensure(port, resource, calls, request="r"):
    ctx = ReconcileContext(port, resource)
    return ctx.effects.ensure(key="e", kind="file", request=request, observe=calls.observe,
                              apply=calls.apply)


def _pending(env, port, resource):
    """A pass that reserved the effect and died before apply returned."""
    class Die(BaseException):
        pass

    def apply(request):
        raise Die

    with pytest.raises(Die):
        ReconcileContext(port, resource).effects.ensure(
            key="e", kind="file", request="r", observe=lambda q: "not_applied", apply=apply)
    assert env.store.get_reconcile_effect("files", "a", "e").state == "pending"


@pytest.mark.parametrize(("seen", "state", "applies"), [
    (("applied", "seen"), "applied", 0), ("indeterminate", "indeterminate", 0),
    ("not_applied", "applied", 1)])
def test_a_pending_record_is_observed_first(env, seen, state, applies):
    port, resource = _port(env)
    _pending(env, port, resource)
    calls = Calls(seen=seen)
    result = _ensure(port, resource, calls)
    assert (result.state, calls.observed, calls.applied) == (state, 1, applies)
    assert env.store.get_reconcile_effect("files", "a", "e").state == state


def test_final_records_call_nothing_and_apply_raising_is_indeterminate(env):
    port, resource = _port(env)
    first = _ensure(port, resource, Calls(fail=OSError("disk")))
    assert first.state == "indeterminate"
    calls = Calls()
    assert _ensure(port, resource, calls).state == "indeterminate"
    assert calls.observed == calls.applied == 0


def test_another_request_under_the_same_key_is_refused(env):
    port, resource = _port(env)
    _ensure(port, resource, Calls())
    with pytest.raises(ConflictError) as info:
        _ensure(port, resource, Calls(), request="other")
    assert info.value.code == "effect_request_changed"


def test_workflows_ensure_reserves_then_queues_and_retries_an_interrupted_child(env):
    port, resource = _port(env)
    child = ReconcileContext(port, resource).workflows.ensure(
        request_key="report-1", workflow="report", input={})
    assert child.state == "queued" and child.attempt == 1
    row = env.store.get(child.run_id)
    assert row is not None and row.workflow == "report"
    again = ReconcileContext(port, resource).workflows.ensure(
        request_key="report-1", workflow="report", input={})
    assert again.run_id == child.run_id
    env.store.mark_child_interrupted(child.run_id, "its runner died")
    retry = ReconcileContext(port, resource).workflows.ensure(
        request_key="report-1", workflow="report", input={})
    assert retry.attempt == 2 and retry.run_id != child.run_id and retry.state == "queued"


def test_a_reserved_child_is_queued_under_its_reserved_run_id(env):
    port, resource = _port(env)
    row, _ = env.store.reserve_child("files", "a", "report-1", workflow="report",
                                     input_fingerprint=_fp({}),
                                     run_id="20260101T000000Z-report-0000abcd",
                                     token=port.token)
    child = ReconcileContext(port, resource).workflows.ensure(
        request_key="report-1", workflow="report", input={})
    assert (child.run_id, child.state) == (row.run_id, "queued")


def _fp(value):
    from pi_workflows.protocol.store.controllers import fingerprint
    return fingerprint(value)




ABANDON = """
import sys, time
from types import SimpleNamespace
from pi_workflows import define_controller
from pi_workflows.protocol.controllers.loading import LoadedController
from pi_workflows.protocol.store import Store
from pi_workflows.worker.controllers import reconcile_one

path = sys.argv[1]
store = Store(path, lease_ms=3000)
cfg = SimpleNamespace(paths=SimpleNamespace(store_file=path), lease_ms=3000,
                      busy_timeout_ms=5000, sqlite_synchronous="NORMAL", store_url=None)
store.apply_spec("files", "a", {})
claim = store.claim_reconcile(["files"], "host-test", 3000)
def stuck(ctx, r):
    while True:  # ignores ctx.cancelled()
        time.sleep(0.05)
loaded = LoadedController(define_controller(name="files", initial_status=lambda s: {},
                                            reconcile=stuck, timeout=0.3), "p", "s")
reconcile_one(store, cfg, claim, loaded, (None, None))
"""


def test_a_reconcile_past_its_timeout_is_abandoned_and_requeued(tmp_path):
    import subprocess
    import sys

    store_file = tmp_path / "store.sqlite"
    proc = subprocess.run([sys.executable, "-c", ABANDON, str(store_file)], timeout=30,
                          capture_output=True, text=True)
    assert proc.returncode == 25, proc.stderr
    with Store(store_file) as store:
        entry = store.queue_entry("files", "a")
    assert entry.state == "queued" and entry.attempts == 1
    assert "ran past its timeout (0.3 s)" in entry.last_error


def test_a_status_the_store_refuses_is_an_error_not_a_crash(env):
    env.store.apply_spec("files", "a", {})

    def reconcile(ctx, r):
        ctx.settled({"conditions": [{"type": "Ready", "status": "true", "reason": "x" * 500}]})

    assert _run(env, reconcile) == "error"
    assert "status patch was refused" in env.store.queue_entry("files", "a").last_error


def test_ctx_log_is_recorded_among_the_resources_events(env, capfd):
    env.store.apply_spec("files", "a", {})

    def reconcile(ctx, r):
        ctx.log("copied 3 files", data={"n": 3})
        ctx.log("disk almost full", level="warning")
        ctx.settled()

    assert _run(env, reconcile) == "settled"
    logs = [e for e in env.store.resource_events("files", "a") if e.type == "log"]
    assert [(e.message, e.data) for e in logs] == [
        ("copied 3 files", {"level": "info", "data": {"n": 3}}),
        ("disk almost full", {"level": "warning", "data": None})]
    assert "copied 3 files" not in capfd.readouterr().err
