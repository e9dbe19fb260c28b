"""What a command batch takes: its items and options, checked before anything starts.

Owns the accepted forms of a batch item (a string for ``/bin/sh -c``, an
argv list, or a dict ``{command, cwd, env, stdin, timeout}``), the batch's
bounds (``MAX_BATCH_ITEMS``, ``MAX_BATCH_CONCURRENCY``) and turning the
author's arguments into ``BatchItem``s, refusing every mistake with one
sentence that names the item and the field (``ValueError``, all problems
at once). Runs nothing: ``protocol.batch`` does. Imports the standard
library only.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

MAX_BATCH_ITEMS = 64
MAX_BATCH_CONCURRENCY = 8
DEFAULT_BATCH_CONCURRENCY = 4
# Per stream (stdout, stderr) of each item: 64 items stay bounded in memory and in the
# effect record.
DEFAULT_BATCH_OUTPUT_BYTES = 65_536
ITEM_KEYS = ("command", "cwd", "env", "stdin", "timeout")
# What an author passes as one item: a shell string, an argv list, or a dict of ITEM_KEYS.
ItemArg: TypeAlias = str | Sequence[str | os.PathLike[str]] | Mapping[str, Any]


@dataclass(frozen=True)
class BatchItem:
    """One command, ready to start."""

    index: int
    argv: list[str]
    cwd: str
    env: dict[str, str] | None
    stdin: str | None
    timeout_s: float | None


class _Problems:
    def __init__(self) -> None:
        self.found: list[str] = []

    def add(self, text: str) -> None:
        self.found.append(text)

    def raise_any(self) -> None:
        if len(self.found) == 1:
            raise ValueError(f"run_command_batch: {self.found[0]}")
        if self.found:
            raise ValueError(f"run_command_batch: {len(self.found)} problems: "
                             + "; ".join(self.found))


def _shown(value: Any) -> str:
    """A wrong value as an error shows it: a number as itself, anything else by its type
    (a string may be built from the run's private input)."""
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    return f"a {type(value).__name__}"


def _seconds(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value) and value > 0
    except OverflowError:  # an int too large for a float
        return False


def _argv(command: Any, where: str, problems: _Problems) -> list[str] | None:
    if isinstance(command, str):
        if not command.strip():
            problems.add(f"{where}: command is an empty string")
            return None
        return ["/bin/sh", "-c", command]
    if isinstance(command, list | tuple):
        if not command:
            problems.add(f"{where}: command is an empty list")
            return None
        if not all(isinstance(part, str | os.PathLike) for part in command):
            problems.add(f"{where}: every part of an argv list must be a string")
            return None
        return [os.fspath(part) for part in command]
    problems.add(f"{where}: command must be a string (run by /bin/sh -c) or an argv list,"
                 f" got {type(command).__name__}")
    return None


def _item(index: int, raw: Any, timeout_s: float | None, project_dir: Path,
          problems: _Problems) -> BatchItem | None:
    where = f"item {index}"
    fields: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {"command": raw}
    unknown = sorted(str(k) for k in fields if k not in ITEM_KEYS)
    if unknown:
        problems.add(f"{where}: unknown key(s) {', '.join(map(repr, unknown))};"
                     f" an item takes {', '.join(ITEM_KEYS)}")
    if "command" not in fields:
        problems.add(f"{where}: has no command")
        return None
    before = len(problems.found)
    argv = _argv(fields["command"], where, problems)
    cwd: Any = fields.get("cwd")
    if cwd is None:
        cwd_text = str(project_dir)
    elif isinstance(cwd, str | os.PathLike) and os.fspath(cwd):
        cwd_text = str(project_dir / os.fspath(cwd))  # relative: from the project
    else:
        problems.add(f"{where}: cwd must be a path (a string), got {_shown(cwd)}")
        cwd_text = ""
    env: Any = fields.get("env")
    if env is not None and not (isinstance(env, Mapping) and all(
            isinstance(k, str) and k and "=" not in k and isinstance(v, str)
            for k, v in env.items())):
        problems.add(f"{where}: env must map variable names to string values")
    stdin: Any = fields.get("stdin")
    if stdin is not None and not isinstance(stdin, str):
        problems.add(f"{where}: stdin must be a string, got {type(stdin).__name__}")
    item_timeout: Any = fields.get("timeout", timeout_s)
    if item_timeout is not None and not _seconds(item_timeout):
        problems.add(f"{where}: timeout must be a positive number of seconds or None,"
                     f" got {_shown(item_timeout)}")
    if argv is None or len(problems.found) > before:
        return None
    return BatchItem(index, argv, cwd_text, None if env is None else dict(env), stdin,
                     None if item_timeout is None else float(item_timeout))


def check_batch(items: Any, *, concurrency: Any, timeout: Any, max_output_bytes: Any,
                project_dir: Path) -> list[BatchItem]:
    """The items, checked; ``ValueError`` naming every problem (nothing has started)."""
    problems = _Problems()
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
        raise ValueError("run_command_batch: items must be a list of commands, got"
                         f" {type(items).__name__}")
    if len(items) > MAX_BATCH_ITEMS:
        problems.add(f"{len(items)} items; a batch takes at most {MAX_BATCH_ITEMS}"
                     " (split the work over several batches or actions)")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) \
            or not 1 <= concurrency <= MAX_BATCH_CONCURRENCY:
        problems.add(f"concurrency must be a whole number from 1 to {MAX_BATCH_CONCURRENCY},"
                     f" got {_shown(concurrency)}")
    if timeout is not None and not _seconds(timeout):
        problems.add("timeout must be a positive number of seconds or None,"
                     f" got {_shown(timeout)}")
        timeout = None
    if isinstance(max_output_bytes, bool) or not isinstance(max_output_bytes, int) \
            or max_output_bytes < 0:
        problems.add(f"max_output_bytes must be a whole number of bytes (0 or more),"
                     f" got {_shown(max_output_bytes)}")
    checked = [_item(i, raw, timeout, project_dir, problems)
               for i, raw in enumerate(items[:MAX_BATCH_ITEMS])]
    problems.raise_any()
    return [item for item in checked if item is not None]
