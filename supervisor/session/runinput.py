"""A run's input as a command gets it: words, JSON text or a JSON file.

Owns reading ``--input-json`` / ``--input-file`` (``-``: standard input)
within the input limit, and turning trailing words into ``{"task": ...}``,
with one-line errors that never show the input itself. Used by the typer
commands (through ``supervisor.cli.options``) and the fast command line.
Imports ``protocol`` only.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ...protocol.errors import LimitError, UsageError
from ...protocol.limits import MAX_PRIVATE_INPUT_BYTES


def _read_file(path: str) -> str:
    """The file's text, refusing more than the input limit before reading it all."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_PRIVATE_INPUT_BYTES + 1)
        else:
            with open(path, "rb") as fh:
                data = fh.read(MAX_PRIVATE_INPUT_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read --input-file {path}: {exc.strerror or exc}",
                         code="input_invalid") from None
    if len(data) > MAX_PRIVATE_INPUT_BYTES:
        raise LimitError(f"--input-file {path} is larger than {MAX_PRIVATE_INPUT_BYTES} bytes",
                         code="input_too_large")
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise UsageError(f"--input-file {path} is not UTF-8 text", code="input_invalid") from None


def _parse_json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # The position, never the text: input may be private.
        raise UsageError(f"{where} is not valid JSON: {exc.msg} at position {exc.pos}",
                         code="input_invalid") from None
    except RecursionError:
        raise UsageError(f"{where} is nested too deeply", code="input_invalid") from None
    except ValueError:  # an integer too long to read (more than 4,300 digits)
        raise UsageError(f"{where} has a number too long to read; give it as a string",
                         code="input_invalid") from None


def require_utf8(value: Any, where: str) -> Any:
    """``value``, if all its text can be written as UTF-8; else a usage error.

    Words given in bytes that are not UTF-8 reach Python as lone surrogates
    (``\\udcff``), and so does a JSON escape such as ``"\\ud800"``; the store and
    the bundle write UTF-8, so they are refused here, without the text.
    """
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{where} is not UTF-8 text", code="input_invalid") from None
    return value


def json_input(input_json: str | None, input_file: str | None) -> tuple[bool, Any]:
    """(given, value) of --input-json / --input-file; both at once is a usage error."""
    if input_json is not None and input_file is not None:
        raise UsageError("give either --input-json or --input-file, not both")
    if input_json is not None:
        return True, require_utf8(_parse_json(input_json, "--input-json"), "--input-json")
    if input_file is not None:
        where = f"--input-file {input_file}"
        return True, require_utf8(_parse_json(_read_file(input_file), where), where)
    return False, None


def parse_input(task: list[str] | None, input_json: str | None,
                input_file: str | None = None) -> Any:
    """JSON input if given; otherwise trailing words become ``{"task": ...}``."""
    given, value = json_input(input_json, input_file)
    if given:
        if task:
            raise UsageError("give either TASK words or --input-json/--input-file, not both")
        return value
    return {"task": require_utf8(" ".join(task), "the task")} if task else {}
