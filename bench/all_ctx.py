"""What every figure collector of ``python -m bench all`` is handed, and what it returns.

Owns the context of one ``bench all`` invocation (its temporary directory,
the shared ``PI_WORKFLOWS_HOME``, quick or full sizes, the number of runs,
a cache that lives across runs for what is built once, and an exit stack
for what must be closed at the end), the ``Skip`` a collector raises when
its figures cannot be taken on this machine, and the small helpers the
collectors share. Imports only the standard library and
``bench.host_common``.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .host_common import MB, pct

# figure label -> (value, unit); a value of None is a figure this run could not take.
Figures = dict[str, tuple[float | None, str]]


class Skip(Exception):
    """These figures cannot be taken here (a missing optional part); the message says how
    to get them. Raised once, the group is not tried again."""


@dataclass
class Ctx:
    base: Path
    quick: bool
    repeat: int
    timeout: float
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.base / "home"

    def where(self, group: str, rnd: int) -> Path:
        """A fresh directory for one run of one group (the benches name their projects
        after what they measure, so every run needs its own)."""
        path = self.base / f"r{rnd}" / group
        path.mkdir(parents=True, exist_ok=False)
        return path

    def size(self, full: int, quick: int) -> int:
        return quick if self.quick else full

    def seconds(self, full: float, quick: float) -> float:
        return quick if self.quick else full


def p50(values: list[float]) -> float | None:
    """Nearest-rank, as every bench prints it."""
    return pct(values, 0.5) if values else None


def p99(values: list[float]) -> float | None:
    return pct(values, 0.99) if values else None


def mb(value: float | None) -> float | None:
    return None if value is None else value / MB


def ratio(x: float | None, y: float | None) -> float | None:
    if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)) or y == 0:
        return None
    return x / y
