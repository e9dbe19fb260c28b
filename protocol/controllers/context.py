"""The ``ctx`` a reconcile gets: its outcomes, guarded effects, child workflows, log.

Owns ``ReconcileContext`` and the logic of ``ctx.effects.ensure`` (issue 24
item 4: the record is reserved with the request's fingerprint before
``apply``; an ``applied`` or ``rejected`` record returns without calling
anything; a ``pending`` record left by a crashed pass is observed first:
applied -> recovered, indeterminate -> recorded so, not_applied -> applied
now; ``apply`` raising marks it indeterminate) and of ``ctx.workflows.ensure``
(item 5: a run keyed by request key and input fingerprint, its run id
reserved and saved before it is queued; an ``interrupted`` child gets a new
attempt with a new run id). Every store write goes through ``ReconcilePort``
under the reconcile's claim token, so a worker that lost its claim writes
nothing. Imports ``protocol`` only (definitions for the child's input, the
store's error types and request fingerprint); must not import ``worker`` or
``supervisor``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import ConflictError, UsageError
from ..jsonenc import canonical_json
from ..store.controllers.bounds import fingerprint
from .define import Outcome, Resource, patch_problems

EFFECT_FINAL = ("applied", "rejected")
OBSERVED = ("applied", "not_applied", "indeterminate")
# Child run states a reconcile sees: its run's queue state, or these two.
CHILD_ACTIVE = ("reserved", "queued", "starting", "running", "parked")
MAX_LOG_CHARS = 2000
MAX_LOGS_PER_PASS = 20


class ReconcileError(UsageError):
    """A reconcile used its ``ctx`` wrongly (two outcomes, two effects in one pass)."""

    code = "reconcile_invalid"


class EffectRejected(Exception):
    """Raised by ``apply`` when the world refused the change for good: recorded rejected."""

    def __init__(self, result: Any = None) -> None:
        super().__init__(str(result))
        self.result = result


class EffectRecord(Protocol):
    @property
    def state(self) -> str: ...
    @property
    def result(self) -> Any: ...


class ChildRecord(Protocol):
    @property
    def run_id(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def fingerprint(self) -> str: ...
    @property
    def state(self) -> str: ...


class ReconcilePort(Protocol):
    """What a reconcile needs of the store, fenced by its claim token."""

    def reserve_effect(self, key: str, *, kind: str, fingerprint: str, generation: int,
                       request: Any) -> tuple[EffectRecord, bool]:
        """The effect record (``pending`` if new) and whether this call created it;
        ConflictError when the key has another fingerprint, generation or kind."""
        ...

    def settle_effect(self, key: str, state: str, result: Any) -> EffectRecord: ...

    def child_run(self, request_key: str, fingerprint: str) -> ChildRecord | None:
        """The latest attempt for (request key, fingerprint), its state from its run."""
        ...

    def start_child_run(self, request_key: str, fingerprint: str, workflow: str, input: Any,
                        attempt: int) -> ChildRecord:
        """Reserve (and save) a new run id for the attempt, then queue the run."""
        ...

    def queue_child_run(self, child: ChildRecord, workflow: str, input: Any) -> ChildRecord:
        """Queue a reserved attempt whose pass crashed before it was queued (same run id)."""
        ...

    def log(self, level: str, message: str, data: Any) -> None: ...


@dataclass(frozen=True)
class EffectResult:
    """What ``ctx.effects.ensure`` returns: the record's state and result.

    ``called`` says whether this pass called ``apply``; ``recovered`` that a
    crashed pass's pending record turned out applied when observed.
    """

    key: str
    state: str
    result: Any = None
    called: bool = False
    recovered: bool = False

    @property
    def applied(self) -> bool:
        return self.state == "applied"


@dataclass(frozen=True)
class ChildRun:
    """What ``ctx.workflows.ensure`` returns: the attempt's run and its state."""

    request_key: str
    run_id: str
    attempt: int
    state: str  # reserved | queued | starting | running | parked | done | failed | cancelled

    @property
    def finished(self) -> bool:
        return self.state not in CHILD_ACTIVE


def _observed(value: Any) -> tuple[str, Any]:
    state, result = (value if isinstance(value, tuple) and len(value) == 2 else (value, None))
    if state not in OBSERVED:
        raise ReconcileError(f"observe must return one of {', '.join(OBSERVED)} (or a pair"
                             f" (state, result)), got {state!r}")
    return state, result


class Effects:
    """``ctx.effects``: at most one guarded effect per pass."""

    def __init__(self, port: ReconcilePort, generation: int) -> None:
        self._port = port
        self._generation = generation
        self.used: str | None = None

    def ensure(self, *, key: str, kind: str, request: Any,
               observe: Callable[[Any], Any], apply: Callable[[Any], Any]) -> EffectResult:
        """Apply ``request`` at most once under ``key`` (see the module docstring)."""
        if self.used is not None:
            raise ReconcileError(f"effects.ensure({key!r}): this pass already ensured"
                                 f" {self.used!r}; one effect per pass, requeue for the next")
        if not isinstance(key, str) or not key or not isinstance(kind, str) or not kind:
            raise ReconcileError("effects.ensure needs a key and a kind (non-empty text)")
        self.used = key
        port = self._port
        record, created = port.reserve_effect(key, kind=kind, fingerprint=fingerprint(request),
                                              generation=self._generation, request=request)
        if record.state in EFFECT_FINAL or record.state == "indeterminate":
            return EffectResult(key, record.state, record.result)
        if not created:  # pending: a pass crashed between the reservation and its end
            try:
                seen, result = _observed(observe(request))
            except ReconcileError:
                raise
            except Exception as exc:
                port.log("warning", f"effect {key}: observe failed: {type(exc).__name__}: {exc}",
                         None)
                seen, result = "indeterminate", {"error": f"{type(exc).__name__}: {exc}"}
            if seen == "applied":
                record = port.settle_effect(key, "applied", result)
                port.log("info", f"effect {key}: recovered (applied by an earlier pass)", None)
                return EffectResult(key, record.state, record.result, recovered=True)
            if seen == "indeterminate":
                record = port.settle_effect(key, "indeterminate", result)
                return EffectResult(key, record.state, record.result)
        try:
            result = apply(request)
        except EffectRejected as exc:
            record = port.settle_effect(key, "rejected", exc.result)
            return EffectResult(key, record.state, record.result, called=True)
        except Exception as exc:
            record = port.settle_effect(key, "indeterminate",
                                        {"error": f"{type(exc).__name__}: {exc}"})
            port.log("warning", f"effect {key}: apply failed: {type(exc).__name__}: {exc}", None)
            return EffectResult(key, record.state, record.result, called=True)
        record = port.settle_effect(key, "applied", result)
        return EffectResult(key, record.state, record.result, called=True)


class Workflows:
    """``ctx.workflows``: child runs keyed by request key and input fingerprint."""

    def __init__(self, port: ReconcilePort) -> None:
        self._port = port

    def ensure(self, *, request_key: str, workflow: str, input: Any = None) -> ChildRun:
        if not isinstance(request_key, str) or not request_key:
            raise ReconcileError("workflows.ensure needs a request_key (non-empty text)")
        if not isinstance(workflow, str) or not workflow:
            raise ReconcileError("workflows.ensure needs a workflow name")
        fp = fingerprint(input)
        child = self._port.child_run(request_key, fp)
        if child is not None and child.state == "reserved":
            child = self._port.queue_child_run(child, workflow, input)
        elif child is None or child.state == "interrupted":
            attempt = 1 if child is None else child.attempt + 1
            child = self._port.start_child_run(request_key, fp, workflow, input, attempt)
        return ChildRun(request_key, child.run_id, child.attempt, child.state)


@dataclass
class ReconcileContext:
    """The ``ctx`` of one reconcile of one resource."""

    port: ReconcilePort
    resource: Resource
    cancel_event: threading.Event = field(default_factory=threading.Event)
    outcome: Outcome | None = None
    finalizer_removed: bool = False
    _logs: int = 0

    def __post_init__(self) -> None:
        self.effects = Effects(self.port, self.resource.metadata.generation)
        self.workflows = Workflows(self.port)

    def _end(self, kind: str, patch: Mapping[str, Any] | None, after_s: float = 0.0) -> Outcome:
        if self.outcome is not None:
            raise ReconcileError(f"ctx.{kind}: this reconcile already ended with"
                                 f" ctx.{self.outcome.kind}")
        if problems := patch_problems(patch):
            raise ReconcileError(f"ctx.{kind}: " + "; ".join(problems))
        self.outcome = Outcome(kind, dict(patch or {}), after_s)  # type: ignore[arg-type]
        return self.outcome

    def settled(self, patch: Mapping[str, Any] | None = None) -> Outcome:
        """The resource is as its spec asks: write ``patch`` and wait for a change."""
        return self._end("settled", patch)

    def requeue(self, patch: Mapping[str, Any] | None = None) -> Outcome:
        """Write ``patch`` and reconcile again at once."""
        return self._end("requeue", patch)

    def requeue_after(self, seconds: float, patch: Mapping[str, Any] | None = None) -> Outcome:
        """Write ``patch`` and reconcile again after ``seconds`` (at most a day)."""
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) \
                or not 0 <= seconds <= 86_400:
            raise ReconcileError(f"ctx.requeue_after: seconds must be 0 to 86400, got {seconds!r}")
        return self._end("requeue_after", patch, float(seconds))

    def remove_finalizer(self) -> None:
        """This controller's cleanup of a deleted resource is done: with the outcome's
        write its finalizer goes, and the store deletes the resource once none is left."""
        if not self.resource.metadata.deletion_requested:
            raise ReconcileError("ctx.remove_finalizer: the resource is not being deleted")
        self.finalizer_removed = True

    def cancelled(self) -> bool:
        """True once this reconcile should stop (its timeout, or the worker stopping)."""
        return self.cancel_event.is_set()

    def log(self, message: str, *, level: str = "info", data: Any = None) -> None:
        """A line about the resource (bounded: 2,000 characters, 20 a pass): the port
        records it among the resource's events (type ``log``, ``worker.ctlport``)."""
        self._logs += 1
        if self._logs > MAX_LOGS_PER_PASS:
            return
        text = str(message)
        if len(text) > MAX_LOG_CHARS:
            text = text[:MAX_LOG_CHARS] + "..."
        if data is not None and len(canonical_json(data)) > MAX_LOG_CHARS:
            data = None
        self.port.log(level if level in ("info", "warning", "error") else "info", text, data)


__all__ = ["ChildRun", "ConflictError", "EffectRejected", "EffectResult", "ReconcileContext",
           "ReconcileError", "ReconcilePort", "fingerprint"]
