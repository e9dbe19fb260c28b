"""The TOML config file's checks: known keys only, and errors that name the file.

Owns reading the file (a syntax error names it), refusing a key the settings
do not have (with a "did you mean"), and saying in words what type a setting
expects (``an integer >= 100``, ``one of always, node, never``), so a bad
value reads as one line naming the file, the key and the type. Imports
``protocol.errors`` and the standard library; ``protocol.settings`` uses it.
"""

from __future__ import annotations

import difflib
import tomllib
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from .errors import UsageError

_TYPE_WORDS: dict[Any, str] = {int: "an integer", float: "a number", bool: "true or false",
                               str: "a string", Path: "a path"}
_BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))


def read_config(path: Path, known: Iterable[str]) -> dict[str, Any]:
    """The file's settings; an unreadable file or an unknown key is a ``UsageError``."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read the config file {path}: {exc.strerror or exc}",
                         code="config_invalid") from None
    except UnicodeDecodeError:
        raise UsageError(f"the config file {path} is not UTF-8 text",
                         code="config_invalid") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"the config file {path} is not valid TOML: {exc}",
                         code="config_invalid") from None
    except ValueError:
        # tomllib converts an integer with int(), which refuses over 4300 digits.
        raise UsageError(f"the config file {path} holds a number too long to read",
                         code="config_invalid") from None
    names = sorted(known)
    for key in data:
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(names)}"
            raise UsageError(f"unknown key {key!r} in the config file {path}{hint}",
                             code="config_invalid")
    return data


def expected(annotation: Any, metadata: Iterable[Any] = ()) -> str:
    """What a setting of this type accepts, in words."""
    optional = False
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        parts = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(parts) < len(typing.get_args(annotation))
        annotation = parts[0] if len(parts) == 1 else annotation
    if typing.get_origin(annotation) is Literal:
        words = "one of " + ", ".join(str(v) for v in typing.get_args(annotation))
    else:
        words = _TYPE_WORDS.get(annotation, "a value")
    bounds = [f"{sign} {getattr(rule, attribute)}" for rule in metadata
              for attribute, sign in _BOUNDS if getattr(rule, attribute, None) is not None]
    if bounds:
        words += " " + " and ".join(bounds)
    return words + (" (or left out)" if optional else "")
