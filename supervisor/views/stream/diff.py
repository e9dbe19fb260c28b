"""Patches between two view documents: the ops that turn one into the other.

Owns ``diff(old, new)`` (the smallest ops this module's three kinds can say:
``set``, ``del`` and ``append``, so a list that only grew is one ``append``
and not a copy) and ``apply_ops(doc, ops)``, which a subscriber uses to keep
its copy. JSON values only. Imports nothing of the project.
"""

from __future__ import annotations

import copy
from typing import Any

Path = list[str | int]
Op = dict[str, Any]


def same(a: Any, b: Any) -> bool:
    """JSON equality: ``1``, ``1.0`` and ``True`` differ (Python's ``==`` says they don't)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def diff(old: Any, new: Any, path: Path | None = None) -> list[Op]:
    """Ops that make ``old`` equal to ``new`` (both JSON values)."""
    at: Path = [] if path is None else path
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[Op] = []
        for key, value in new.items():
            if key not in old:
                ops.append({"op": "set", "path": [*at, key], "value": value})
            elif not same(old[key], value):
                ops.extend(diff(old[key], value, [*at, key]))
        ops.extend({"op": "del", "path": [*at, key]} for key in old if key not in new)
        return ops
    if isinstance(old, list) and isinstance(new, list) and len(new) >= len(old) \
            and type(old) is type(new):
        ops = []
        for index, (before, after) in enumerate(zip(old, new, strict=False)):
            if not same(before, after):
                ops.extend(diff(before, after, [*at, index]))
        if len(new) > len(old):
            ops.append({"op": "append", "path": at, "values": new[len(old):]})
        # Many changed items read better as one replacement of the list.
        if len(ops) > 1 + len(new) // 2:
            return [{"op": "set", "path": at, "value": new}]
        return ops
    if same(old, new):
        return []
    return [{"op": "set", "path": at, "value": new}]


def _parent(doc: Any, path: Path) -> Any:
    node = doc
    for key in path[:-1]:
        node = node[key]
    return node


def apply_ops(doc: Any, ops: list[Op]) -> Any:
    """``doc`` with ``ops`` applied; the input is not changed."""
    out = copy.deepcopy(doc)
    for op in ops:
        path = list(op["path"])
        kind = op["op"]
        if kind == "append":
            target = out
            for key in path:
                target = target[key]
            target.extend(copy.deepcopy(op["values"]))
        elif not path:
            if kind != "set":
                raise ValueError("only set applies to the whole document")
            out = copy.deepcopy(op["value"])
        elif kind == "set":
            parent = _parent(out, path)
            key = path[-1]
            if isinstance(parent, list) and key == len(parent):
                parent.append(copy.deepcopy(op["value"]))
            else:
                parent[key] = copy.deepcopy(op["value"])
        elif kind == "del":
            del _parent(out, path)[path[-1]]
        else:
            raise ValueError(f"unknown op {kind!r}")
    return out
