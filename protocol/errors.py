"""Error types and process exit codes shared by every pi-workflows process.

Owns the table of CLI exit codes (a worker's are in ``protocol.wire``) and
the exception types that cross module boundaries. Must not import anything else from the package.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes of the ``pi-workflows`` CLI (documented in docs/cli.md)."""

    OK = 0
    RUN_FAILED = 1
    USAGE = 2
    WAITING = 3
    PARKED = 4
    STORE_INCOMPATIBLE = 5
    STORE_UNAVAILABLE = 6
    INTERNAL = 70


class PiWorkflowsError(Exception):
    """Base class: ``code`` is a stable machine-readable error code."""

    code = "error"
    exit_code: ExitCode = ExitCode.INTERNAL

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.code


class UsageError(PiWorkflowsError):
    """Bad input from a user or caller; nothing durable was changed."""

    code = "usage"
    exit_code = ExitCode.USAGE


class UnsafeDirectory(UsageError, OSError):
    """A private directory not safe to use: a symbolic link, another user's, not a directory.

    Also an ``OSError``, so the callers that already treat a directory they
    cannot use as an I/O failure keep doing so (the host's wakeup listener
    falls back to polling); the command line shows it as a one-line usage error.
    """

    code = "unsafe_directory"

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"refusing {path}: {why}")
        self.filename = path  # what an OSError handler names

    def __str__(self) -> str:
        return self.message  # not OSError's "[Errno None] None: path"


class NotADirectory(UnsafeDirectory, NotADirectoryError):
    """The not-a-directory refusal, still a ``NotADirectoryError`` for the bundle's callers."""


class LimitError(UsageError):
    """A value broke one of the documented limits (ids, sizes)."""

    code = "limit_exceeded"


class NotFound(UsageError):
    code = "not_found"


class StoreError(PiWorkflowsError):
    code = "store_error"
    exit_code = ExitCode.STORE_UNAVAILABLE


class StoreTransientError(StoreError):
    """Busy, locked or an I/O hiccup: retrying later may succeed."""

    code = "store_busy"


class StorePermanentError(StoreError):
    """Schema, constraint or corruption: retrying will not help."""

    code = "store_unavailable"


class StoreIncompatible(StoreError):
    """The store file has a layout this version does not use."""

    code = "store_incompatible"
    exit_code = ExitCode.STORE_INCOMPATIBLE


class TransitionRefused(PiWorkflowsError):
    """A compare-and-set found the row in another state (or gone)."""

    code = "transition_refused"
    exit_code = ExitCode.USAGE


class ClaimLost(PiWorkflowsError):
    """The caller's claim token is no longer current: it must stop writing."""

    code = "claim_lost"


class ConflictError(PiWorkflowsError):
    """A uniqueness rule refused the change (reservation, continuation, effect)."""

    code = "conflict"
    exit_code = ExitCode.USAGE


class PresentationPending(ConflictError):
    """A session's new start, refused while its model is owed a presentation turn.

    Nothing durable was changed: exit 2, like any refused request.
    """

    code = "presentation_pending"
    exit_code = ExitCode.USAGE
