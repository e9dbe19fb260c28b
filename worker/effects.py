"""Guarded effects for action and shell nodes.

Owns the protocol around one effectful node attempt: record ``pending`` in
the store before running, ``applied``/``rejected`` with the result after;
replay a settled effect instead of repeating it; rerun a ``pending`` one only
when the node is idempotent, otherwise report ``effect_indeterminate``.
Imports ``protocol`` and ``worker.nodes`` (``NodeOutcome``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Protocol

from ..protocol.errors import ConflictError
from ..protocol.jsonenc import canonical_json
from ..protocol.states import Outcome
from ..protocol.store import Effect
from .nodes import NodeOutcome

Note = Callable[[str, dict[str, Any]], None]


class EffectStore(Protocol):
    def begin_effect(self, run_id: str, node_id: str, effect_key: str, fingerprint: str,
                     attempt_id: str, *, token: str | None = None) -> tuple[Effect, bool]: ...
    def apply_effect(self, run_id: str, node_id: str, effect_key: str, result: Any, *,
                     token: str | None = None) -> Effect: ...
    def reject_effect(self, run_id: str, node_id: str, effect_key: str, result: Any, *,
                      token: str | None = None) -> Effect: ...
    def mark_effect_indeterminate(self, run_id: str, node_id: str, effect_key: str, *,
                                  token: str | None = None) -> Effect: ...
    def retry_effect(self, run_id: str, node_id: str, effect_key: str, attempt_id: str, *,
                     token: str | None = None) -> Effect: ...


def fingerprint(request: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(request).encode()).hexdigest()


def _from_record(record: dict[str, Any], restore: Callable[[Any], Any]) -> NodeOutcome:
    return NodeOutcome(record["outcome"], output=restore(record.get("output")),
                       error_code=record.get("errorCode"), error=record.get("error"),
                       extra=dict(record.get("extra") or {}))


def run_guarded(store: EffectStore, *, run_id: str, token: str, node_id: str, effect_key: str,
                request: Any, attempt_id: str, idempotent: bool,
                execute: Callable[[], NodeOutcome], keep: Callable[[Any], Any],
                restore: Callable[[Any], Any], note: Note) -> NodeOutcome:
    """Run ``execute`` at most once per (run, node, effect key) unless idempotent.

    ``keep`` moves large values into bundle artifacts before they are stored
    in the effect record; ``restore`` brings them back on replay. ``note``
    appends an ``effect_recorded`` trace event.
    """
    fp = fingerprint(request)
    try:
        effect, created = store.begin_effect(run_id, node_id, effect_key, fp, attempt_id,
                                             token=token)
    except ConflictError:
        # An earlier attempt recorded this effect for another request (a command
        # built from the attempt id or the clock, or a forced resume on an edited
        # definition): neither replaying nor repeating it would be right.
        note("conflict", {"effectKey": effect_key, "fingerprint": fp})
        return NodeOutcome(Outcome.FAILED, error_code="effect_conflict",
            error="an earlier attempt of this node recorded its effect for a different"
                  " request (command, environment, input or step); it was neither replayed"
                  " nor run again")
    if not created:
        if effect.state in ("applied", "rejected"):
            note("replayed", {"effectKey": effect_key, "state": effect.state})
            return _from_record(effect.result, restore)
        if not idempotent:
            if effect.state == "pending":
                store.mark_effect_indeterminate(run_id, node_id, effect_key, token=token)
            note("indeterminate", {"effectKey": effect_key})
            return NodeOutcome(Outcome.FAILED, error_code="effect_indeterminate",
                error="an earlier attempt of this effect was interrupted and may or may not have"
                      " been applied; the node is not idempotent, so it was not run again")
        if effect.state == "indeterminate":
            store.retry_effect(run_id, node_id, effect_key, attempt_id, token=token)
    note("pending", {"effectKey": effect_key, "fingerprint": fp, "rerun": not created})
    outcome = execute()
    record = {"outcome": outcome.outcome, "output": keep(outcome.output),
              "errorCode": outcome.error_code, "error": outcome.error, "extra": outcome.extra}
    if outcome.outcome == Outcome.OK:
        store.apply_effect(run_id, node_id, effect_key, record, token=token)
        note("applied", {"effectKey": effect_key})
    elif outcome.outcome == Outcome.FAILED:
        store.reject_effect(run_id, node_id, effect_key, record, token=token)
        note("rejected", {"effectKey": effect_key})
    elif outcome.outcome == Outcome.TIMED_OUT:
        store.mark_effect_indeterminate(run_id, node_id, effect_key, token=token)
        note("indeterminate", {"effectKey": effect_key})
    # cancelled (park or cancel): left pending, exactly like a crash mid-effect.
    return outcome
