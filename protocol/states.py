"""The vocabulary of states: queue states, run statuses, and the rules between them.

Owns the one spelling of every state, the named sets (claimed, active,
terminal, settled), the queue's transition table (seed 002, exactly), how a
settled bundle maps onto the queue, and how a (queue state, run status)
pair reads to a person and as a CLI exit code. Nothing else in the package
spells a state. Imports only ``protocol.errors``.
"""

from __future__ import annotations

from enum import StrEnum

from .errors import ExitCode, TransitionRefused


class QueueState(StrEnum):
    """A row of ``workflow_run_queue``: who may own the run, and whether it ended."""

    QUEUED = "queued"
    STARTING = "starting"
    RUNNING = "running"
    PARKED = "parked"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Outcome(StrEnum):
    """How one node attempt ended: the ``outcome`` of its result record (``$result``)."""

    OK = "ok"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


class RunStatus(StrEnum):
    """``state.json``'s ``status``: what the bundle says happened to the run."""

    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


Q = QueueState
S = RunStatus

QUEUE_STATES: tuple[QueueState, ...] = tuple(QueueState)
# A row in these states carries a claim (runner, token, lease); no other row does.
CLAIMED: frozenset[QueueState] = frozenset({Q.STARTING, Q.RUNNING})
# The origin session's one active reservation (seed 002).
ACTIVE: frozenset[QueueState] = frozenset({Q.QUEUED, Q.STARTING, Q.RUNNING})
# Nothing moves a row out of these.
TERMINAL: frozenset[QueueState] = frozenset({Q.DONE, Q.FAILED, Q.CANCELLED})
# A row a runner may give back without ending the run.
UNOWNED: frozenset[QueueState] = frozenset({Q.QUEUED, Q.PARKED})

TERMINAL_STATUSES: frozenset[RunStatus] = frozenset({S.COMPLETED, S.FAILED, S.TIMED_OUT,
                                                     S.CANCELLED})
# A run that ended without completing (sync and the views word these alike).
UNSUCCESSFUL_STATUSES: frozenset[RunStatus] = TERMINAL_STATUSES - {S.COMPLETED}
# A settled bundle is never resumed: its run ended or waits for an answer.
SETTLED_STATUSES: frozenset[RunStatus] = TERMINAL_STATUSES | {S.WAITING}

# Seed 002's "State transitions", exactly. Claim transfers (a new token on a
# starting/running row after lease expiry or a dead owner) keep the state and
# are not transitions.
TRANSITIONS: frozenset[tuple[QueueState, QueueState]] = frozenset({
    (Q.QUEUED, Q.STARTING),
    (Q.QUEUED, Q.CANCELLED),
    (Q.STARTING, Q.RUNNING),
    (Q.STARTING, Q.FAILED),
    (Q.STARTING, Q.CANCELLED),
    (Q.STARTING, Q.QUEUED),
    (Q.RUNNING, Q.PARKED),
    (Q.RUNNING, Q.DONE),
    (Q.RUNNING, Q.FAILED),
    (Q.RUNNING, Q.CANCELLED),
    (Q.PARKED, Q.STARTING),
    (Q.PARKED, Q.CANCELLED),
})


# A paused run (``pi-workflows pause``) is no state of its own: the row keeps
# its state and carries this error code. On a queued or parked row it holds
# the run (no runner claims it: ``claim_next`` skips a row with a code); on a
# starting or running row it asks the owner to park the run, paused, at its
# next node boundary. So the transition table stays seed 002's, the store's
# layout stays v1, and a claim that changes hands keeps the request.
PAUSED_CODE = "paused"
PAUSED = "paused"  # the one word a person is shown for such a run


def is_paused(queue_state: str, error_code: str | None) -> bool:
    """The run is held by ``pause`` (not merely asked to pause)."""
    return error_code == PAUSED_CODE and queue_state in UNOWNED


def pause_pending(queue_state: str, error_code: str | None) -> bool:
    """A pause was asked for and the run's owner has not reached a boundary yet."""
    return error_code == PAUSED_CODE and queue_state in CLAIMED


def sql_list(states: frozenset[QueueState] | tuple[QueueState, ...]) -> str:
    """``('a', 'b')`` for SQL, in declaration order, so queries never spell a state."""
    return "(" + ", ".join(f"'{s.value}'" for s in QueueState if s in states) + ")"


def allowed(from_state: str, to_state: str) -> bool:
    return (from_state, to_state) in TRANSITIONS


def check_transition(run_id: str, from_state: str, to_state: str) -> None:
    """Every writer of a queue state calls this before its compare-and-set.

    A claim transfer (a new token on a claimed row) keeps the state and is
    checked with ``check_transfer`` instead.
    """
    if not allowed(from_state, to_state):
        raise TransitionRefused(f"run {run_id} is {from_state}; it cannot become {to_state}")


def check_transfer(run_id: str, state: str) -> None:
    if state not in CLAIMED:
        raise TransitionRefused(f"run {run_id} is {state}; only a claimed run changes hands")


# The terminal bundle event for a node outcome that ends the run, and the
# status each terminal (or waiting) event leaves in state.json.
END_EVENT: dict[Outcome, str] = {Outcome.OK: "run_completed", Outcome.FAILED: "run_failed",
                                 Outcome.TIMED_OUT: "run_timed_out",
                                 Outcome.CANCELLED: "run_cancelled"}
STATUS_AFTER: dict[str, RunStatus] = {
    "run_completed": S.COMPLETED, "run_failed": S.FAILED, "run_timed_out": S.TIMED_OUT,
    "run_cancelled": S.CANCELLED, "run_waiting": S.WAITING,
}


def queue_state_for(status: str) -> QueueState:
    """Where the queue goes once the bundle settled with ``status``.

    A run waiting at a checkpoint is done as far as the queue is concerned:
    its answer is a new (continuation) run.
    """
    if status in (S.COMPLETED, S.WAITING):
        return Q.DONE
    if status == S.CANCELLED:
        return Q.CANCELLED
    if status in (S.FAILED, S.TIMED_OUT):
        return Q.FAILED
    raise ValueError(f"run status {status!r} is not settled")


def exit_code(queue_state: str, status: str | None) -> ExitCode | None:
    """The CLI exit code for a run, or None while it has not come to rest.

    The queue decides whether the run is over; the bundle, when it settled,
    says how. A run the queue ended without a settled bundle (a worker that
    crash-looped, a launch that failed before its bundle) failed.
    """
    if queue_state in UNOWNED:
        return ExitCode.PARKED
    if queue_state not in TERMINAL:
        return None
    if status in SETTLED_STATUSES:
        return {S.COMPLETED: ExitCode.OK, S.WAITING: ExitCode.WAITING}.get(
            RunStatus(status), ExitCode.RUN_FAILED)
    return ExitCode.RUN_FAILED


def seen_status(queue_state: str, status: str | None, cancel_requested: bool) -> str | None:
    """The run status a person is shown: a wait closed by ``cancel`` reads cancelled.

    Cancelling a waiting run leaves the row ``done`` and the bundle
    ``waiting`` (seed 002's transitions stay as they are); the row's cancel
    flag is what closed the wait (``Store.close_wait``).
    """
    if queue_state == Q.DONE and status == S.WAITING and cancel_requested:
        return S.CANCELLED
    return status


def display_state(queue_state: str, status: str | None, error_code: str | None = None) -> str:
    """One word (or ``queue/status`` when the two tell different things) for a person.

    A paused run reads ``paused`` whatever its row and bundle say.
    """
    if is_paused(queue_state, error_code):
        return PAUSED
    if status is None or status == queue_state or queue_state == Q.DONE:
        return status or queue_state
    return f"{queue_state}/{status}"
