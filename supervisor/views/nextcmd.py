"""The next command for a run: what a person pastes to answer, follow, cancel or fork it.

Owns the decisions every suggestion shares, so a printed command works when
pasted: where a failed run failed (the node ``fork RUN`` starts at without
``--from``), the live end of a chain of answers (the run a command about an
answered checkpoint has to name instead), and the advice ``fork`` and
``cancel`` give for an answered run. Reads the store and bundles only.
Imports ``protocol`` and ``views.wording``; never another wing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...protocol.bundle import Bundle, BundleCorrupt
from ...protocol.states import TERMINAL, RunStatus, seen_status
from ...protocol.store import QueueRow, Store
from .wording import cli

SETTLE_EVENTS = frozenset({"node_finished", "node_failed"})
FAILED_STATUSES = frozenset({RunStatus.FAILED, RunStatus.TIMED_OUT})
MAX_CHAIN = 1000  # guards a damaged store only


def failed_node(events: list[dict[str, Any]]) -> str | None:
    """Where a failed run failed: an attempt left open, else the node whose failure ended it.

    None when the last node to end finished fine (a routing error, the step
    limit before the next node): the run failed between nodes.
    """
    open_node: str | None = None
    failed: str | None = None
    for event in events:
        if event["type"] == "node_started":
            open_node = event.get("nodeId")
        elif event["type"] in SETTLE_EVENTS:
            open_node = None
            failed = event.get("nodeId") if event["type"] == "node_failed" else None
    return open_node or failed


def fork_default(bundle: Bundle) -> str | None:
    """The node ``fork RUN`` (no ``--from``) would start at, or None if it needs ``--from``."""
    try:
        return failed_node(bundle.events()) if bundle.exists() else None
    except (BundleCorrupt, OSError, ValueError):
        return None


def fork_command(project: Path | None, run_id: str, status: str | None,
                 default: str | None) -> str:
    """``fork RUN`` where that alone works (a failed run with a failed node), else with
    ``--from NODE`` for the person to fill in."""
    if status in FAILED_STATUSES and default is not None:
        return cli(project, "fork", run_id)
    return cli(project, "fork", run_id, blank="--from NODE")


def next_steps(status: str | None, run_id: str, failed_node: str | None,
               project: Path | None, *, fork_from: str | None = None) -> list[tuple[str, str]]:
    """(what, exact command) pairs for a run that ended ``status``.

    ``failed_node`` is the step whose output to look at; ``fork_from`` the
    node ``fork RUN`` alone starts at (``fork_default``), None when the fork
    needs ``--from``.
    """
    if status == RunStatus.WAITING:
        return [("answer it", cli(project, "answer", run_id, blank='"your answer"'))]
    if status in FAILED_STATUSES:
        steps = []
        if failed_node:
            steps.append(("see its output", cli(project, "logs", run_id, failed_node)))
        steps.append(("run it again from there" if fork_from else "run it again from a node",
                      fork_command(project, run_id, status, fork_from)))
        return steps
    if status == RunStatus.COMPLETED:
        return [("every step's output", cli(project, "logs", run_id))]
    return []


def seen(runs_dir: Path, row: QueueRow) -> str | None:
    """The run status a person is shown for ``row`` (None before it has a bundle)."""
    bundle = Bundle(runs_dir, row.run_id)
    try:
        status = bundle.raw_state().get("status") if bundle.exists() else None
    except (BundleCorrupt, OSError, ValueError):
        status = None
    return seen_status(row.state, status, row.cancel_requested)


def chain_end(store: Store, row: QueueRow) -> QueueRow:
    """The last live member of the chain that continues ``row`` (``row`` itself if none)."""
    end = row
    for _ in range(MAX_CHAIN):
        child = store.continuation_of(end.run_id)
        if child is None:
            break
        end = child
    return end


def answered_advice(store: Store, runs_dir: Path, row: QueueRow, child: QueueRow, *,
                    verb: str, project: Path | None = None) -> str:
    """Why ``verb`` (``fork`` or ``cancel``) does not apply to an answered run, and the
    command that does, addressed to the chain's live end."""
    end = chain_end(store, child)
    goes_on = (f"run {row.run_id} was answered and goes on as run {end.run_id}"
               if end.run_id == child.run_id else
               f"run {row.run_id} was answered; its chain goes on as run {end.run_id}")
    status = seen(runs_dir, end)
    cancel = f"cancel that run (`{cli(project, 'cancel', end.run_id)}`)"
    if end.state not in TERMINAL:
        then = cancel if verb == "cancel" else (
            f"follow it with `{cli(project, 'watch', end.run_id)}`; once it has ended, fork it")
    elif status == RunStatus.WAITING:
        answer = cli(project, "answer", end.run_id, blank='"your answer"')
        then = cancel if verb == "cancel" else f"it waits for an answer (`{answer}`)"
    elif verb == "cancel":
        then = f"it has ended ({status or end.state}), so there is nothing to cancel"
    else:
        default = fork_default(Bundle(runs_dir, end.run_id))
        then = f"fork that run (`{fork_command(project, end.run_id, status, default)}`)"
    return f"{goes_on}: {then}"
