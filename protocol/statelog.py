"""The projection's journal: ``state.ndjson``, small deltas on top of ``state.json``.

A run with many distinct nodes has a projection that grows with every node
(``outputs``/``results`` per node), so rewriting ``state.json`` in full after
every event costs O(run length) per step. So the writer appends each
transition's delta here instead, and rewrites ``state.json`` (then empties
this file) only when the run's status changes or the journal has grown as
large as ``state.json`` and at least ``COMPACT_FROM_BYTES``: each step costs
the size of its delta, amortised. A journal line is the projection write of
its event exactly as a ``state.json`` replace is: it comes after its trace line, and a line torn by
a crash was never written.

Owns the delta line format and folding the journal into the projection.
Imports ``protocol.jsonenc`` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .jsonenc import compact_json, complete_lines

LOG_NAME = "state.ndjson"
# The journal is emptied into ``state.json`` once it would outgrow both the
# projection and this floor. A full rewrite is a replace-by-rename, which on
# ext4 waits for the new file's blocks (about 1-6 ms on a busy disk even with
# no fsync) where an append costs microseconds, so even a small run journals
# and a short run rewrites ``state.json`` only when its status changes.
COMPACT_FROM_BYTES = 64 * 1024
# Keys whose value is a mapping that a delta patches key by key (a node's
# entry), never replaces whole.
MERGE_KEYS = ("outputs", "results")


def delta_line(seq: int, at: int, changes: Mapping[str, Any],
               merge: Mapping[str, Mapping[str, Any]]) -> bytes:
    """One journal line: the projection at ``seq`` is the one at ``seq - 1`` plus this."""
    record = {"traceSeq": seq, "set": {**changes, "updatedAt": at},
              "merge": {k: dict(v) for k, v in merge.items() if v}}
    return (compact_json(record) + "\n").encode()


def fold(base: dict[str, Any], data: bytes) -> dict[str, Any]:
    """``base`` (from ``state.json``) with every journal line after its ``traceSeq`` applied.

    Lines at or before the base's ``traceSeq`` are left over from before the
    last full rewrite and skipped; the fold stops at the first line that is
    torn, not JSON, or not the next seq (the journal's valid prefix).
    """
    return fold_prefix(base, data)[0]


def fold_prefix(base: dict[str, Any], data: bytes) -> tuple[dict[str, Any], int]:
    """``fold`` and the length of the valid prefix it read (skipped lines included).

    A writer may append after that prefix only: a line after a torn one
    would never be folded.
    """
    seq = int(base.get("traceSeq", 0))
    state = base
    valid = 0
    for line, end in complete_lines(data):
        if not isinstance(line, dict) or not isinstance(line.get("traceSeq"), int):
            break
        if line["traceSeq"] <= seq and state is base:
            valid = end
            continue
        if line["traceSeq"] != seq + 1 or not isinstance(line.get("set"), dict) \
                or not isinstance(line.get("merge"), dict):
            break
        if state is base:
            state = dict(base)
        state.update(line["set"])
        for key, patch in line["merge"].items():
            if isinstance(patch, dict):
                state[key] = {**(state.get(key) or {}), **patch}
        seq = line["traceSeq"]
        state["traceSeq"] = seq
        valid = end
    return state, valid
