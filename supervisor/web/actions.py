"""What ``--actions`` lets the page do: answer, cancel, resume and fork a run.

Owns turning a POST's fields into the session layer's calls, the same ones
the CLI makes: ``session.actions.answer`` (a human decision's answer is
checked there and refused before anything is written), ``cancel_run``
(without waiting: the page follows the run live), ``session.fork.fork_run``
with ``wake_host``, and resume as the ``resume`` command does it for a
host (withdraw a pause, unpause, unblock; a changed workflow file is
refused: the command line's ``--force`` decides that). Each returns a short
sentence for the page. Imports ``protocol``, ``views`` and ``session``;
never ``cli``, ``host``, the worker or another sibling.
"""

from __future__ import annotations

from typing import Any

from ...protocol.agentenv import resolve_agent_dir
from ...protocol.errors import UsageError
from ...protocol.paths import Paths
from ...protocol.settingspec import SettingsLike
from ...protocol.states import CLAIMED, PAUSED_CODE, TERMINAL, QueueState
from ..session import actions
from ..session.fork import fork_run
from ..views.holds import chat_hold, hold_text
from ..views.runref import existing_row, project_store

MAX_ANSWER = 16 * 1024


class Actions:
    """The run actions of one project, for the dashboard."""

    def __init__(self, settings: SettingsLike, paths: Paths) -> None:
        self.settings = settings
        self.paths = paths

    def answer(self, run: str, fields: dict[str, Any]) -> dict[str, Any]:
        """``fields``: ``choice`` (a decision's label, with ``text`` for a text input),
        or ``text`` alone (a plain checkpoint's answer, a string)."""
        choice, text = fields.get("choice"), fields.get("text")
        if choice is not None and not isinstance(choice, str):
            raise UsageError("choice must be a string", code="bad_answer")
        if text is not None and not isinstance(text, str):
            raise UsageError("text must be a string", code="bad_answer")
        if len(text or "") > MAX_ANSWER:
            raise UsageError(f"the answer is longer than {MAX_ANSWER} characters",
                             code="bad_answer")
        value: Any
        if choice:
            # As `answer RUN LABEL [TEXT]` gives it: the session layer checks the label.
            value = choice if not text else f"{choice} {text}"
        elif text and text.strip():
            value = text
        else:
            raise UsageError("give an answer (a choice or some text)", code="bad_answer")
        answered, row, given = actions.answer(self.settings, self.paths, run, value,
                                              force=False, owner=None)
        return {**actions.answer_json(answered, row, given),
                "message": f"answered; continuation {row.run_id} queued"}

    def cancel(self, run: str) -> dict[str, Any]:
        result, _ = actions.cancel_run(self.settings, self.paths, run, no_wait=True)
        return {**actions.cancel_json(result), "message": "cancel requested"}

    def resume(self, run: str) -> dict[str, Any]:
        with project_store(self.settings, self.paths) as store:
            row = existing_row(store, run, self.paths)
            run = row.run_id
            hold = chat_hold(store, row)
            if hold is not None:
                raise UsageError(f"run {run} waits: it is {hold_text(hold)}; it resumes when"
                                 " that chat ends", code="held")
            paused = row.error_code == PAUSED_CODE and row.state not in TERMINAL
            if paused and row.state in CLAIMED:
                row = store.unpause(run)
                return {"runId": run, "state": row.state,
                        "message": "pause withdrawn; it goes on running"}
            if row.state != QueueState.PARKED and not paused:
                raise UsageError(f"run {run} is {row.state}; only a paused or parked run can"
                                 " be resumed", code="not_parked")
            if paused:
                row = store.unpause(run)
            elif row.error_code == "source_changed":
                raise UsageError(f"run {run} waits because its workflow file changed since it"
                                 " started; check the change, then `pi-workflows resume"
                                 f" {run} --force`", code="source_changed")
            elif row.error_code is not None:
                row = store.unblock(run)
            actions.wake_host(store, self.paths)
        return {"runId": run, "state": row.state, "message": f"resumed: {row.state}"}

    def fork(self, run: str, from_node: str | None) -> dict[str, Any]:
        if from_node is not None and not isinstance(from_node, str):
            raise UsageError("from must be a node id", code="bad_fork")
        with project_store(self.settings, self.paths) as store:
            row = existing_row(store, run, self.paths)
            plan, queued = fork_run(store, self.paths.runs_dir, row, from_node or None,
                                    force=False, notify_session=None,
                                    fsync=self.settings.fsync, project=self.paths.project,
                                    agent_dir=resolve_agent_dir(self.settings.pi_agent_dir))
            actions.wake_host(store, self.paths)
        return {"runId": queued.run_id, "forkedFrom": plan.original, "forkNode": plan.node,
                "message": f"forked from {plan.node}: {queued.run_id} queued"}
