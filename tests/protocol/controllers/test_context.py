"""The reconcile context: outcomes, every branch of effects.ensure, workflows.ensure.

Against ``FakePort``, a dictionary with the port's rules (reserve before
apply, conflicts on another fingerprint/kind/generation, final states).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest
from pi_workflows import EffectRejected
from pi_workflows.protocol.controllers.context import ReconcileContext, ReconcileError
from pi_workflows.protocol.controllers.define import resource_view
from pi_workflows.protocol.errors import ConflictError

pytestmark = pytest.mark.timeout(30)


@dataclass(frozen=True)
class Rec:
    state: str
    result: Any
    kind: str
    fingerprint: str
    generation: int


@dataclass(frozen=True)
class Child:
    run_id: str
    attempt: int
    fingerprint: str
    state: str


class FakePort:
    def __init__(self) -> None:
        self.effects: dict[str, Rec] = {}
        self.children: dict[tuple[str, str], Child] = {}
        self.queued: list[str] = []
        self.logs: list[str] = []
        self.fail_queue = False

    def reserve_effect(self, key, *, kind, fingerprint, generation, request):
        rec = self.effects.get(key)
        if rec is None:
            self.effects[key] = rec = Rec("pending", None, kind, fingerprint, generation)
            return rec, True
        if (rec.kind, rec.fingerprint, rec.generation) != (kind, fingerprint, generation):
            raise ConflictError(f"effect {key} was reserved for another request")
        return rec, False

    def settle_effect(self, key, state, result):
        self.effects[key] = rec = replace(self.effects[key], state=state, result=result)
        return rec

    def child_run(self, request_key, fingerprint):
        return self.children.get((request_key, fingerprint))

    def start_child_run(self, request_key, fingerprint, workflow, input, attempt):
        child = Child(f"run-{attempt}", attempt, fingerprint, "reserved")
        self.children[(request_key, fingerprint)] = child  # saved before it is queued
        if self.fail_queue:
            raise OSError("crash between the reservation and the queue")
        return self.queue_child_run(child, workflow, input)

    def queue_child_run(self, child, workflow, input):
        self.queued.append(child.run_id)
        fresh = replace(child, state="queued")
        self.children[next(k for k, v in self.children.items() if v == child)] = fresh
        return fresh

    def log(self, level, message, data):
        self.logs.append(message)


def _ctx(port, generation=1):
    meta = {"uid": "u1", "controller": "c", "key": "k", "resource_version": 1,
            "generation": generation}
    return ReconcileContext(port, resource_view(meta, {"x": 1}, {}))


class Calls:
    def __init__(self, seen="not_applied", fail=None):
        self.observed = self.applied = 0
        self.seen, self.fail = seen, fail

    def observe(self, request):
        self.observed += 1
        return self.seen

    def apply(self, request):
        self.applied += 1
        if self.fail is not None:
            raise self.fail
        return {"wrote": request}


def _ensure(ctx, calls, request="r", key="e1"):
    return ctx.effects.ensure(key=key, kind="file", request=request, observe=calls.observe,
                              apply=calls.apply)


def test_outcomes_end_the_reconcile_once():
    ctx = _ctx(FakePort())
    out = ctx.requeue_after(2, {"controller_status": {"a": 1}})
    assert (out.kind, out.after_s, dict(out.patch)) == ("requeue_after", 2.0,
                                                       {"controller_status": {"a": 1}})
    with pytest.raises(ReconcileError, match=r"already ended with ctx\.requeue_after"):
        ctx.settled()


def test_bad_patch_and_delay_are_refused():
    with pytest.raises(ReconcileError, match="no field 'spec'"):
        _ctx(FakePort()).settled({"spec": 1})
    with pytest.raises(ReconcileError, match="seconds must be 0 to 86400"):
        _ctx(FakePort()).requeue_after(-1)


def test_new_effect_is_reserved_before_apply_and_applied():
    port = FakePort()
    calls = Calls()
    seen_state = []

    def apply(request):
        seen_state.append(port.effects["e1"].state)
        return "ok"

    calls.apply = apply  # type: ignore[method-assign]
    res = _ensure(_ctx(port), calls)
    assert seen_state == ["pending"] and res.state == "applied" and res.called
    assert calls.observed == 0


@pytest.mark.parametrize("state", ["applied", "rejected", "indeterminate"])
def test_a_settled_record_returns_without_calling_anything(state):
    port = FakePort()
    port.effects["e1"] = Rec(state, "old", "file", _fp("r"), 1)
    calls = Calls()
    res = _ensure(_ctx(port), calls)
    assert (res.state, res.result, res.called) == (state, "old", False)
    assert calls.observed == calls.applied == 0


def _fp(request):
    from pi_workflows.protocol.controllers.context import fingerprint
    return fingerprint(request)


def _crashed(port):
    port.effects["e1"] = Rec("pending", None, "file", _fp("r"), 1)


def test_pending_observed_applied_is_recovered_without_apply():
    port = FakePort()
    _crashed(port)
    calls = Calls(seen=("applied", "seen"))
    res = _ensure(_ctx(port), calls)
    assert (res.state, res.recovered, res.called, calls.applied) == ("applied", True, False, 0)
    assert port.effects["e1"].result == "seen"


def test_pending_observed_indeterminate_is_recorded_so():
    port = FakePort()
    _crashed(port)
    calls = Calls(seen="indeterminate")
    res = _ensure(_ctx(port), calls)
    assert res.state == "indeterminate" and calls.applied == 0


def test_pending_observed_not_applied_is_applied_now():
    port = FakePort()
    _crashed(port)
    calls = Calls(seen="not_applied")
    res = _ensure(_ctx(port), calls)
    assert (res.state, res.called, calls.observed, calls.applied) == ("applied", True, 1, 1)


def test_observe_raising_is_indeterminate():
    port = FakePort()
    _crashed(port)
    calls = Calls()
    calls.observe = lambda request: 1 / 0  # type: ignore[method-assign]
    assert _ensure(_ctx(port), calls).state == "indeterminate" and calls.applied == 0


def test_observe_with_a_wrong_answer_is_a_reconcile_error():
    port = FakePort()
    _crashed(port)
    with pytest.raises(ReconcileError, match="observe must return"):
        _ensure(_ctx(port), Calls(seen="yes"))


def test_apply_raising_marks_it_indeterminate():
    port = FakePort()
    res = _ensure(_ctx(port), Calls(fail=OSError("disk")))
    assert res.state == "indeterminate" and "OSError: disk" in res.result["error"]


def test_apply_rejecting_marks_it_rejected():
    port = FakePort()
    res = _ensure(_ctx(port), Calls(fail=EffectRejected("no")))
    assert (res.state, res.result) == ("rejected", "no")


@pytest.mark.parametrize("change", ["request", "generation"])
def test_reusing_a_key_for_another_request_or_generation_is_an_error(change):
    port = FakePort()
    _ensure(_ctx(port), Calls())
    ctx = _ctx(port, generation=2 if change == "generation" else 1)
    with pytest.raises(ConflictError):
        _ensure(ctx, Calls(), request="other" if change == "request" else "r")


def test_one_effect_per_pass():
    ctx = _ctx(FakePort())
    _ensure(ctx, Calls())
    with pytest.raises(ReconcileError, match="one effect per pass"):
        _ensure(ctx, Calls(), key="e2")


def test_workflows_ensure_reserves_then_queues_and_is_idempotent():
    port = FakePort()
    first = _ctx(port).workflows.ensure(request_key="report", workflow="w", input={"a": 1})
    again = _ctx(port).workflows.ensure(request_key="report", workflow="w", input={"a": 1})
    assert (first.run_id, first.state) == ("run-1", "queued") and again.run_id == "run-1"
    assert port.queued == ["run-1"]


def test_a_reserved_child_whose_pass_crashed_is_queued_with_the_same_run_id():
    port = FakePort()
    port.fail_queue = True
    with pytest.raises(OSError):
        _ctx(port).workflows.ensure(request_key="report", workflow="w", input=1)
    port.fail_queue = False
    child = _ctx(port).workflows.ensure(request_key="report", workflow="w", input=1)
    assert (child.run_id, child.state, port.queued) == ("run-1", "queued", ["run-1"])


def test_an_interrupted_child_gets_a_new_attempt_with_a_new_run_id():
    port = FakePort()
    _ctx(port).workflows.ensure(request_key="report", workflow="w", input=1)
    key = next(iter(port.children))
    port.children[key] = replace(port.children[key], state="interrupted")
    child = _ctx(port).workflows.ensure(request_key="report", workflow="w", input=1)
    assert (child.run_id, child.attempt, child.state) == ("run-2", 2, "queued")


def test_log_is_bounded():
    port = FakePort()
    ctx = _ctx(port)
    for _ in range(30):
        ctx.log("x" * 5000)
    assert len(port.logs) == 20 and len(port.logs[0]) == 2003


def test_remove_finalizer_only_while_deleting():
    with pytest.raises(ReconcileError, match="not being deleted"):
        _ctx(FakePort()).remove_finalizer()
    meta = {"uid": "u1", "controller": "c", "key": "k", "resource_version": 1,
            "generation": 1, "deletion_requested": True, "finalizers": ["c"]}
    ctx = ReconcileContext(FakePort(), resource_view(meta, {}, {}))
    ctx.remove_finalizer()
    assert ctx.finalizer_removed
