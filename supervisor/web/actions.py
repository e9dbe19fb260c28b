"""What ``--actions`` lets the page do: answer, cancel, resume and fork a run.

Owns turning a POST's fields into the session layer's calls, the same ones
the CLI makes: ``session.actions.answer`` (a human decision's answer is
checked there and refused before anything is written), ``cancel_run``
(without waiting: the page follows the run live), ``session.actions.fork``,
and ``session.resume.lift`` then ``wake_host``, as ``resume`` does for a
host (a changed workflow file is refused: the command line's ``--force``
decides that). Each returns a short sentence for the page. Imports
``protocol``, ``views`` and ``session``; never ``cli``, ``host``, the worker
or another sibling.
"""

from __future__ import annotations

from typing import Any

from ...protocol.errors import UsageError
from ...protocol.paths import Paths
from ...protocol.settingspec import SettingsLike
from ..session import actions
from ..session.resume import lift
from ..views.runref import existing_row, project_store
from ..views.wording import cli

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
        if not choice and not (text and text.strip()):
            raise UsageError("give an answer (a choice or some text)", code="bad_answer")
        # As `answer RUN LABEL [TEXT]` gives it (the words joined, refused unless
        # UTF-8): the session layer checks the label.
        value = actions.answer_value([w for w in (choice, text) if w], None, None)
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
            # The page has no --force: a changed workflow file is accepted on the
            # command line, after a look at the change.
            lifted = lift(store, self.paths.runs_dir, row, force=False,
                          fsync=self.settings.fsync,
                          force_hint=f"`{cli(self.paths.project, 'resume', run, '--force')}`")
            if lifted.withdrawn:
                return {"runId": run, "state": lifted.row.state,
                        "message": "pause withdrawn; it goes on running"}
            actions.wake_host(store, self.paths)
        return {"runId": run, "state": lifted.row.state,
                "message": f"resumed: {lifted.row.state}"}

    def fork(self, run: str, from_node: object) -> dict[str, Any]:
        if from_node is not None and not isinstance(from_node, str):
            raise UsageError("from must be a node id", code="bad_fork")
        plan, queued = actions.fork(self.settings, self.paths, run, from_node or None,
                                    force=False, owner=None)
        return {"runId": queued.run_id, "forkedFrom": plan.original, "forkNode": plan.node,
                "message": f"forked from {plan.node}: {queued.run_id} queued"}
