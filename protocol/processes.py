"""What a bundle records about the processes working on its run.

Owns the ``processes.json`` record format: each entry has the pid, the
process start time (identity: a pid alone proves nothing), the role and
the owning runner. Writing goes through the fenced ``BundleWriter``.
Imports ``protocol.clock`` and ``protocol.liveness``.
"""

from __future__ import annotations

import os
from typing import Any

from .clock import now_ms
from .liveness import process_start_time

PROCESSES_SCHEMA = "pi-workflows.processes.v1"


def self_record(role: str, runner_id: str) -> dict[str, Any]:
    pid = os.getpid()
    return {"pid": pid, "startTime": process_start_time(pid), "role": role,
            "runnerId": runner_id, "pgid": os.getpgid(pid), "recordedAt": now_ms()}


def child_record(pid: int, role: str, runner_id: str) -> dict[str, Any]:
    return {"pid": pid, "startTime": process_start_time(pid), "role": role,
            "runnerId": runner_id, "pgid": os.getpgid(pid), "recordedAt": now_ms()}


def with_entry(existing: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """Add ``entry``, replacing one for the same pid (latest incarnation wins)."""
    entries = [e for e in existing.get("processes", []) if e.get("pid") != entry["pid"]]
    return {"schema": PROCESSES_SCHEMA, "processes": [*entries, entry]}
