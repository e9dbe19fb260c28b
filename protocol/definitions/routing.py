"""Routing: which node runs after a node finished, given its output and result.

Owns: the switch path language (``$.a.b``, ``$output.a.b``, ``$result.a.b``),
path resolution, scalar case matching, ``next_node`` and ``routes_failures``.
A ``$result.`` path reads any field of the node's result record (issue 23,
item 5); a field the record lacks, at any depth, reads as null, so a switch
can route on it (its ``None`` case, or its default) instead of failing.
Imports only ``protocol.definitions.graph``, ``protocol.errors`` and
``protocol.states``; must not import ``worker`` or ``supervisor``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import PiWorkflowsError
from ..states import Outcome
from .graph import Edge, Scalar, SwitchEdge, Workflow, outgoing

# The fields every result record has (``exitCode`` only a shell node's); any other
# field of a record may be read too.
RESULT_FIELDS = ("outcome", "errorCode", "error", "exitCode")
_SEGMENT = r"^[^.\s\[\]]+$"  # compiled on first use (re caches it)
_INDEX = r"^(0|[1-9][0-9]*)$"
_PREFIXES: tuple[tuple[str, Literal["output", "result"]], ...] = (
    ("$output", "output"), ("$result", "result"), ("$", "output"),
)


class RoutingError(PiWorkflowsError):
    """A switch could not pick a target at run time; the run fails with this."""

    code = "routing_failed"


@dataclass(frozen=True)
class RoutePath:
    """A parsed switch path: which record it reads and the keys to follow."""

    text: str
    base: Literal["output", "result"]
    segments: tuple[str, ...]


def parse_path(text: object) -> RoutePath:
    """Parse a switch path; raises ValueError naming what is wrong with it."""
    if not isinstance(text, str):
        raise ValueError(f"must be a path string, got {type(text).__name__}")
    for prefix, base in _PREFIXES:
        if text == prefix and base == "output":
            return RoutePath(text, base, ())  # `$` / `$output`: the whole output
        if text.startswith(prefix + "."):
            rest = text[len(prefix) + 1:]
            break
    else:
        raise ValueError("must start with '$.', '$output.' or '$result.'")
    segments = tuple(rest.split("."))
    for segment in segments:
        if not segment:
            raise ValueError("has an empty segment (check for '..' or a trailing '.')")
        if not re.match(_SEGMENT, segment):
            raise ValueError(
                f"has an invalid segment {segment!r}: segments are dot-separated keys"
                " without spaces or brackets (index lists as $.items.0)"
            )
    return RoutePath(text, base, segments)


def is_scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _step(value: Any, segment: str) -> tuple[bool, Any]:
    if isinstance(value, Mapping):
        return (True, value[segment]) if segment in value else (False, None)
    if isinstance(value, list | tuple) and re.match(_INDEX, segment):
        index = int(segment)
        return (True, value[index]) if index < len(value) else (False, None)
    return False, None


def resolve_path(
    path: str | RoutePath, output: Any, result: Mapping[str, Any] | None,
) -> Any:
    """The value at ``path``; raises RoutingError when there is none."""
    try:
        parsed = path if isinstance(path, RoutePath) else parse_path(path)
    except ValueError as exc:
        raise RoutingError(f"switch path {path!r} {exc}") from None
    if parsed.base == "result":
        # A field the record lacks (exitCode of a command that never exited)
        # reads as null, so a switch can still route on it.
        found: Any = dict(result or {})
        for segment in parsed.segments:
            ok, found = _step(found, segment)
            if not ok:
                return None
        return found
    value: Any = output
    walked = "$"
    for segment in parsed.segments:
        found, nxt = _step(value, segment)
        if not found:
            what = type(value).__name__ if value is not None else "null"
            raise RoutingError(
                f"no value at {parsed.text}: {walked} is {_describe(value, what)}"
                f" without {segment!r}"
            )
        value, walked = nxt, f"{walked}.{segment}"
    return value


def _describe(value: Any, what: str) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)}"
    return f"a {what}" if value is not None else "null"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", str: "string"}.get(type(value), "number")


def same_scalar(case: Scalar, value: Scalar) -> bool:
    """JSON-style equality: ``true`` is not ``1``; ``1`` equals ``1.0``."""
    if isinstance(case, bool) or isinstance(value, bool):
        return isinstance(case, bool) and isinstance(value, bool) and case == value
    if case is None or value is None:
        return case is None and value is None
    if isinstance(case, str) or isinstance(value, str):
        return isinstance(case, str) and isinstance(value, str) and case == value
    return case == value


def match_case(item: SwitchEdge, value: Scalar) -> str | None:
    """The target of the case equal to ``value``, else the default (may be None)."""
    for case, target in item.cases.items():
        if same_scalar(case, value):
            return target
    return item.default


def routes_failures(workflow: Workflow, node_id: str) -> bool:
    """True when a non-ok outcome of ``node_id`` is routed (a ``$result`` switch).

    When False, a failed, timed-out or cancelled node fails the run.
    """
    item = outgoing(workflow, node_id)
    if not isinstance(item, SwitchEdge):
        return False
    try:
        return parse_path(item.on).base == "result"
    except ValueError:
        return False


def next_node(
    workflow: Workflow, node_id: str, output: Any, result: Mapping[str, Any] | None,
) -> str | None:
    """The id of the node to run after ``node_id``, or None when the run ends.

    ``output`` is the node's accepted output (None if it produced none) and
    ``result`` its result record (None means ``{"outcome": "ok"}``).
    """
    if node_id not in workflow.nodes:
        raise RoutingError(f"cannot route from {node_id!r}: it is not a node of this workflow")
    outcome = (result or {}).get("outcome", Outcome.OK)
    item = outgoing(workflow, node_id)
    if outcome != Outcome.OK and not routes_failures(workflow, node_id):
        raise RoutingError(
            f"node {node_id!r} ended {outcome} and its outgoing edge does not route that"
            " outcome (only a switch on $result... does)"
        )
    if item is None:
        return None
    if isinstance(item, Edge):
        return item.target
    where = f"switch from {node_id!r} on {item.on!r}"
    try:
        value = resolve_path(item.on, output, result)
    except RoutingError as exc:
        raise RoutingError(f"{where}: {exc}") from None
    if not is_scalar(value):
        raise RoutingError(
            f"{where}: the value is {_describe(value, type(value).__name__)}, not a scalar"
            " (string, number, boolean or null)"
        )
    target = match_case(item, value)
    if target is None:
        shown = ", ".join(repr(k) for k in item.cases) or "none"
        raise RoutingError(
            # The value itself is not quoted: it may come from private run input.
            f"{where}: no case matches the {_kind(value)} value (cases: {shown})"
            " and there is no default"
        )
    return target
