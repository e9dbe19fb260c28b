"""The drill's report: one JSON file (0600) and a short summary for people.

Owns the report's shape (``schema`` ``pi-workflows.drill.v1``: the seed and
iterations, the settings, every fault injected with its time and target,
every violation with its run id and evidence, and counts) and the summary
lines printed on stdout. Imports the drill's checker and scratch; never the
worker.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .checker import KINDS, Violation
from .scratch import write_private

SCHEMA = "pi-workflows.drill.v1"


@dataclass
class Report:
    seed: int
    iterations: int
    project: str
    agents: bool
    skipped: list[str] = field(default_factory=list)  # work left out, and why
    settings: dict[str, str] = field(default_factory=dict)
    faults: list[dict[str, Any]] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    runs: Counter[str] = field(default_factory=Counter)  # final queue state -> runs
    statuses: Counter[str] = field(default_factory=Counter)  # final bundle status -> runs
    launches: Counter[str] = field(default_factory=Counter)  # how runs were started
    errors: Counter[str] = field(default_factory=Counter)  # error code of ended runs -> runs
    refused: dict[str, int] = field(default_factory=dict)
    hosts_started: int = 0
    resources: int = 0  # controller resources left at the end
    resources_ready: int = 0  # of them Ready
    wall_s: float = 0.0
    settled: bool = False

    def as_json(self) -> dict[str, Any]:
        applied = Counter(f["kind"] for f in self.faults if f.get("applied"))
        missed = Counter(f["kind"] for f in self.faults if not f.get("applied"))
        by_kind = Counter(v.kind for v in self.violations)
        return {
            "schema": SCHEMA, "seed": self.seed, "iterations": self.iterations,
            "project": self.project, "agentSteps": self.agents, "skipped": self.skipped,
            "settings": self.settings, "wallSeconds": round(self.wall_s, 1),
            "settled": self.settled, "ok": not self.violations,
            "faults": self.faults,
            "violations": [v.as_json() for v in self.violations],
            "counts": {
                "faultsInjected": dict(sorted(applied.items())),
                "faultsWithoutTarget": dict(sorted(missed.items())),
                "violations": {k: by_kind.get(k, 0) for k in KINDS},
                "runs": sum(self.runs.values()),
                "queueStates": dict(sorted(self.runs.items())),
                "bundleStatuses": dict(sorted(self.statuses.items())),
                "launches": dict(sorted(self.launches.items())),
                "errorCodes": dict(sorted(self.errors.items())),
                "refusedLaunches": dict(sorted(self.refused.items())),
                "hostsStarted": self.hosts_started,
                "resources": self.resources,
                "resourcesReady": self.resources_ready,
            },
        }

    def write(self, path: Path) -> None:
        write_private(path, json.dumps(self.as_json(), indent=2, sort_keys=True) + "\n")

    def summary(self) -> list[str]:
        data = self.as_json()
        counts = data["counts"]
        faults = ", ".join(f"{k} {n}" for k, n in counts["faultsInjected"].items()) or "none"
        lines = [f"drill seed {self.seed}: {self.iterations} iteration(s) in"
                 f" {self.wall_s:.0f} s, {counts['runs']} run(s)"
                 f" ({', '.join(f'{k} {n}' for k, n in counts['queueStates'].items())}),"
                 f" {self.resources} resource(s) ({self.resources_ready} ready)",
                 f"faults injected: {faults}"]
        if counts["errorCodes"]:
            lines.append("ended with: " + ", ".join(f"{k} {n}" for k, n
                                                   in counts["errorCodes"].items()))
        lines += [f"skipped: {why}" for why in self.skipped]
        if not self.violations:
            lines.append("no violations")
        else:
            kinds = ", ".join(f"{k} {n}" for k, n in counts["violations"].items() if n)
            lines.append(f"{len(self.violations)} violation(s): {kinds}")
            for v in self.violations[:10]:
                lines.append(f"  {v.kind} {v.run_id or '-'}: {v.evidence}")
        return lines
