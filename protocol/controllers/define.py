"""Authoring a controller: ``define_controller`` and what a reconcile reads and returns.

Owns ``Controller`` (name, ``initial_status``, ``reconcile``, timeout),
``define_controller`` (every mistake one clear message, all raised together
as ``ControllerDefinitionError``), the read-only ``Resource`` a reconcile is
handed (``metadata``, ``spec``, ``status``, deeply frozen), ``Outcome``
(how a reconcile ended) and the status patch rules. Imports
``protocol.definitions.graph`` (the error type) only; must not import
``worker``, ``supervisor`` or the store.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from ..definitions.graph import DefinitionError

NAME_PATTERN = r"^[a-z][a-z0-9-]*$"
NAME_RULE = "use lowercase letters, digits and '-', starting with a letter (at most 63)"
MAX_NAME = 63
DEFAULT_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 3600.0
CONDITION_STATUSES = ("true", "false", "unknown")
STATUS_KEYS = ("observed_generation", "conditions", "workflow_run", "controller_status")
OutcomeKind = Literal["settled", "requeue", "requeue_after", "error"]


class ControllerDefinitionError(DefinitionError):
    """A controller definition is invalid; ``problems`` lists every problem found."""

    code = "controller_invalid"


def name_problems(name: object) -> list[str]:
    """Problems with a controller name (``^[a-z][a-z0-9-]*$``, at most 63 characters)."""
    if not isinstance(name, str):
        return [f"controller name must be a string, got {type(name).__name__}"]
    if not re.match(NAME_PATTERN, name) or len(name) > MAX_NAME:
        return [f"controller name {name!r} is invalid: {NAME_RULE}"]
    return []


@dataclass(frozen=True)
class Controller:
    """One controller: how to start a resource's status and how to reconcile it."""

    name: str
    initial_status: Callable[[Any], Any]
    reconcile: Callable[[Any, Resource], Any]
    timeout: float = DEFAULT_TIMEOUT_S
    description: str | None = None


def define_controller(*, name: str, initial_status: Callable[[Any], Any],
                      reconcile: Callable[[Any, Resource], Any],
                      timeout: float = DEFAULT_TIMEOUT_S,
                      description: str | None = None) -> Controller:
    """A controller ``name`` whose ``reconcile(ctx, resource)`` ends with a ctx outcome.

    ``initial_status(spec)`` returns the ``controller_status`` a new resource
    starts with; ``timeout`` (seconds, at most an hour) bounds one reconcile.
    """
    problems = list(name_problems(name))
    if not callable(initial_status):
        problems.append("initial_status must be a function of the spec, got"
                        f" {type(initial_status).__name__}")
    if not callable(reconcile):
        problems.append(f"reconcile must be a function (ctx, resource), got"
                        f" {type(reconcile).__name__}")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        problems.append(f"timeout must be a number of seconds, got {type(timeout).__name__}")
    elif not (math.isfinite(timeout) and 0 < timeout <= MAX_TIMEOUT_S):
        problems.append(f"timeout must be more than 0 and at most {MAX_TIMEOUT_S:g} seconds,"
                        f" got {timeout!r}")
    if description is not None and not isinstance(description, str):
        problems.append(f"description must be text, got {type(description).__name__}")
    if problems:
        raise ControllerDefinitionError(problems)
    return Controller(name, initial_status, reconcile, float(timeout), description)


# --- what a reconcile reads ---------------------------------------------------


def frozen(value: Any) -> Any:
    """A read-only copy of JSON data: mappings become proxies, lists tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: frozen(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(frozen(v) for v in value)
    return value


@dataclass(frozen=True)
class Metadata:
    uid: str
    controller: str
    key: str
    resource_version: int
    generation: int
    deletion_requested: bool
    finalizers: tuple[str, ...]


@dataclass(frozen=True)
class Resource:
    """The resource as one reconcile sees it; nothing in it can be changed."""

    metadata: Metadata
    spec: Any
    status: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def condition(self, type_: str) -> Mapping[str, Any] | None:
        for cond in self.status.get("conditions") or ():
            if cond.get("type") == type_:
                return dict(cond)
        return None


def resource_view(metadata: Mapping[str, Any], spec: Any, status: Mapping[str, Any]) -> Resource:
    meta = Metadata(str(metadata["uid"]), str(metadata["controller"]), str(metadata["key"]),
                    int(metadata["resource_version"]), int(metadata["generation"]),
                    bool(metadata.get("deletion_requested", False)),
                    tuple(metadata.get("finalizers") or ()))
    return Resource(meta, frozen(spec), frozen(dict(status)))


# --- how a reconcile ends -----------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """The end of one reconcile: its kind, its status patch, a delay for ``requeue_after``."""

    kind: OutcomeKind
    patch: Mapping[str, Any]
    after_s: float = 0.0
    error: str | None = None


def patch_problems(patch: object) -> list[str]:
    """What is wrong with a status patch (``None`` is an empty one)."""
    if patch is None:
        return []
    if not isinstance(patch, Mapping):
        return [f"a status patch must be a dict, got {type(patch).__name__}"]
    problems = [f"status has no field {key!r} (it has {', '.join(STATUS_KEYS)})"
                for key in patch if key not in STATUS_KEYS]
    gen = patch.get("observed_generation")
    if gen is not None and (isinstance(gen, bool) or not isinstance(gen, int)):
        problems.append("observed_generation must be an integer")
    conditions = patch.get("conditions")
    if conditions is not None:
        if not isinstance(conditions, list | tuple):
            problems.append("conditions must be a list of {type, status, reason, message}")
        else:
            for cond in conditions:
                problems += _condition_problems(cond)
    return problems


def _condition_problems(cond: object) -> list[str]:
    if not isinstance(cond, Mapping):
        return [f"a condition must be a dict, got {type(cond).__name__}"]
    out = []
    if not isinstance(cond.get("type"), str) or not cond.get("type"):
        out.append("a condition needs a type (text), e.g. 'Ready'")
    if cond.get("status") not in CONDITION_STATUSES:
        out.append(f"condition {cond.get('type')!r}: status must be one of"
                   f" {', '.join(CONDITION_STATUSES)}, got {cond.get('status')!r}")
    for key in ("reason", "message"):
        if cond.get(key) is not None and not isinstance(cond.get(key), str):
            out.append(f"condition {cond.get('type')!r}: {key} must be text")
    return out


def initial_status(controller: Controller, spec: Any) -> dict[str, Any]:
    """The status patch a new resource starts with: Ready unknown, and the
    controller's own part, ``initial_status(spec)`` (the file's code)."""
    return {"conditions": [{"type": "Ready", "status": "unknown", "reason": "Pending",
                            "message": "not reconciled yet", "observed_generation": None}],
            "controller_status": controller.initial_status(spec)}
