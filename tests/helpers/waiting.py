"""Waiting for a condition with a deadline: the one poll loop of the test suites.

Owns ``poll`` (the predicate's first truthy value, or None at the
deadline), ``wait_for`` (the same, but the deadline fails the test with
what it waited for) and ``HarnessError``, the failure a wait or a
misbehaving process raises (an ``AssertionError``, so pytest reports it as
a failure). The e2e harness and the benches use them too. Imports the
standard library only: never pytest, ``pi_workflows``, a conftest or a
test module.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class HarnessError(AssertionError):
    """A wait that ran out or a process that misbehaved (an AssertionError, so pytest
    reports it as a failure with its message)."""


def poll(predicate: Callable[[], Any], timeout: float, interval: float = 0.05) -> Any:
    """The predicate's first truthy value, or None once ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(interval)


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition",
             interval: float = 0.05, diag: Callable[[], str] | None = None) -> Any:
    """Like ``poll``, but a timeout raises ``HarnessError`` naming ``what`` (and ``diag()``)."""
    value = poll(predicate, timeout, interval)
    if not value:
        extra = f"\n{diag()}" if diag is not None else ""
        raise HarnessError(f"timed out after {timeout:g} s waiting for {what}{extra}")
    return value
