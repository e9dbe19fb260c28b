"""Run-time checks on the values a run carries: its parsed input and node outputs.

Owns ``check_output`` (a node's output must be plain JSON data, at most
``MAX_OUTPUT_DEPTH`` levels deep), ``OutputError`` and ``apply_input`` (the
workflow's input parser, run before anything is persisted). The rules a
definition must follow live in ``protocol.definitions.validation``. Imports only
``protocol.definitions.graph`` and ``protocol.errors``; must not import ``worker`` or
``supervisor``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import UsageError
from .graph import DefinitionError, Workflow

MAX_OUTPUT_DEPTH = 200
# Python refuses to write longer integers as text (sys.int_info.default_max_str_digits).
MAX_INT_DIGITS = 4300
MAX_INT_BITS = int(MAX_INT_DIGITS * 3.3219)  # about log2(10) bits per digit, conservatively


class OutputError(DefinitionError):
    """A node produced an output that cannot be stored as JSON."""

    code = "output_invalid"


def _short_path(where: str) -> str:
    parts = where.split(".")
    return where if len(parts) <= 6 else ".".join([*parts[:3], "…", *parts[-2:]])


def _plain(value: Any, where: str, depth: int, node_id: str) -> Any:
    if depth > MAX_OUTPUT_DEPTH:
        raise OutputError([f"output of node {node_id!r} is nested deeper than"
                           f" {MAX_OUTPUT_DEPTH} levels at {_short_path(where)}"])
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            # os.listdir() gives such strings for non-UTF-8 file names.
            raise OutputError([f"output of node {node_id!r} has text that is not valid"
                               f" Unicode at {_short_path(where)} (a lone surrogate);"
                               " decode bytes with errors='replace' first"]) from None
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > MAX_INT_BITS:
            raise OutputError([f"output of node {node_id!r} has an integer of more than"
                               f" {MAX_INT_DIGITS} digits at {_short_path(where)};"
                               " give it as a string"])
        return value
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise OutputError([f"output of node {node_id!r} has {value!r} at"
                               f" {_short_path(where)}; JSON has no NaN or infinity"])
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise OutputError([f"output of node {node_id!r} has a non-string key {key!r}"
                                   f" at {_short_path(where)}; JSON object keys are strings"])
            _plain(key, f"{where}.<key>", depth + 1, node_id)  # keys are text too
            out[key] = _plain(item, f"{where}.{key}", depth + 1, node_id)
        return out
    if isinstance(value, list | tuple):
        return [_plain(item, f"{where}.{i}", depth + 1, node_id) for i, item in enumerate(value)]
    raise OutputError([f"output of node {node_id!r} is not JSON-serialisable: {where} is of"
                       f" type {type(value).__name__}"])


def check_output(node_id: str, value: Any) -> Any:
    """Return ``value`` as plain JSON data (tuples become lists), or raise OutputError."""
    return _plain(value, "$", 0, node_id)


def apply_input(workflow: Workflow, raw: Any) -> Any:
    """Parse raw run input with the workflow's ``input`` callable (if any).

    Runs before anything is persisted. A ValueError/TypeError from the parser
    is the author's rejection message; any failure is a UsageError with code
    ``input_invalid``. The parsed value must be JSON data.
    """
    name = workflow.name or "workflow"
    parser: Callable[[Any], Any] | None = workflow.input
    parsed = raw
    if parser is not None:
        try:
            parsed = parser(raw)
        except (ValueError, TypeError) as exc:
            raise UsageError(f"invalid input for {name!r}: {exc}", code="input_invalid") from None
        except Exception as exc:
            raise UsageError(f"the input parser of {name!r} failed: {type(exc).__name__}: {exc}",
                             code="input_invalid") from None
    try:
        return check_output("input", parsed)
    except OutputError as exc:
        reason = exc.problems[0].replace("output of node 'input'", "the parsed input")
        raise UsageError(f"invalid input for {name!r}: {reason}", code="input_invalid") from None
