"""Backoff for transient store errors (busy, locked, I/O hiccups).

Every loop that touches the store goes through ``retry_store`` so that no
worker or host dies on ``SQLITE_BUSY``. Permanent errors pass straight
through. Imports only ``protocol.errors``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar, cast

from .errors import StoreTransientError

T = TypeVar("T")


def backoff_delays(base: float = 0.01, cap: float = 1.0,
                   rng: random.Random | None = None) -> Callable[[int], float]:
    """Full-jitter exponential backoff: attempt n sleeps U(0, min(cap, base*2^n))."""
    source = rng or random.Random()

    def delay(attempt: int) -> float:
        return source.uniform(0, min(cap, base * (2 ** min(attempt, 30))))

    return delay


def retry_store(
    operation: Callable[[], T],
    *,
    deadline_s: float = 30.0,
    base: float = 0.01,
    cap: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
    on_retry: Callable[[int, StoreTransientError, float], None] | None = None,
) -> T:
    """Run ``operation``; retry transient store errors until ``deadline_s`` has passed."""
    delay = backoff_delays(base, cap)
    give_up = monotonic() + deadline_s
    attempt = 0
    while True:
        try:
            return operation()
        except StoreTransientError as exc:
            pause = delay(attempt)
            if monotonic() + pause > give_up:
                raise
            if on_retry is not None:
                on_retry(attempt, exc, pause)
            sleep(pause)
            attempt += 1


class RetryingProxy:
    """Wraps an object so every method call retries transient store errors.

    Each call is one store transaction, so retrying it after a transient
    error (which rolled the transaction back) never applies it twice.
    """

    def __init__(self, inner: object, *, deadline_s: float = 30.0,
                 on_retry: Callable[[int, StoreTransientError, float], None] | None = None) -> None:
        self._inner = inner
        self._deadline_s = deadline_s
        self._on_retry = on_retry

    def __getattr__(self, name: str) -> object:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args: object, **kwargs: object) -> object:
            return retry_store(lambda: attr(*args, **kwargs), deadline_s=self._deadline_s,
                               on_retry=self._on_retry)

        return call


def with_retries(inner: T, *, deadline_s: float = 30.0,
                 on_retry: Callable[[int, StoreTransientError, float], None] | None = None) -> T:
    """``inner`` (a store) with every method call retried on transient errors.

    The proxy forwards every attribute, so it has ``inner``'s type: callers
    keep full type checking instead of casting a proxy themselves.
    """
    return cast(T, RetryingProxy(inner, deadline_s=deadline_s, on_retry=on_retry))
