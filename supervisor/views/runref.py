"""Run references typed by people: a whole run id, a unique prefix, or its trailing hex.

Owns ``resolve_run``, the one place every CLI command that takes a RUN turns
what was typed into a run id (``status 99624cea`` for
``20261201T083022Z-review-99624cea``), and the "ambiguous" and "no such
run" errors; ``project_store`` (the project's store, or "no runs yet") and
``existing_row`` (the queue row a RUN names) for commands built on them.
Imports ``protocol`` and ``views.wording`` (the suggested command).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...protocol.bundle import bundle_exists
from ...protocol.errors import NotFound, UsageError
from ...protocol.limits import validate_run_id
from ...protocol.paths import Paths
from ...protocol.store import QueueRow, Store, open_store, store_present
from .wording import cli

if TYPE_CHECKING:  # pydantic: the fast command line does not load it
    from ...protocol.settingspec import SettingsLike

SHOWN_MATCHES = 5  # an ambiguous reference lists this many of its matches


def _not_found(text: str, paths: Paths) -> NotFound:
    return NotFound(f"no run {text} in project {paths.project}; `{cli(paths.project, 'list')}`"
                    " shows its runs", code="run_not_found")


def resolve_run(store: Store | None, text: str, paths: Paths) -> str:
    """The one run id ``text`` names in this project (``store`` None: there is no store yet).

    An exact id wins; else a unique prefix of the id or of its part after the
    last ``-``. A run with a bundle but no queue row is found by its exact id.
    Raises ``UsageError`` (ambiguous) or ``NotFound``, both exit 2.
    """
    validate_run_id(text)
    if store is None:
        if bundle_exists(paths.runs_dir, text):
            return text
        raise _not_found(text, paths)
    if store.get(text) is not None:
        return text
    matches = store.match_run_ids(text, limit=SHOWN_MATCHES + 1)
    if len(matches) == 1:
        return matches[0]
    if matches:
        shown = ", ".join(matches[:SHOWN_MATCHES])
        more = " and more" if len(matches) > SHOWN_MATCHES else ""
        raise UsageError(f"run {text} is ambiguous: it matches {shown}{more}; give more of"
                         " the id", code="run_ambiguous")
    if bundle_exists(paths.runs_dir, text):
        return text
    raise _not_found(text, paths)


def project_store(settings: SettingsLike, paths: Paths) -> Store:
    """The project's store; none yet means the project has no runs (``NotFound``)."""
    if not store_present(settings, paths.store_file):
        raise NotFound(f"no runs yet for {paths.project} (no store at {paths.store_file})",
                       code="no_store")
    return open_store(settings, paths.store_file)


def existing_row(store: Store, text: str, paths: Paths) -> QueueRow:
    """The queue row of the run ``text`` names (a whole id, a unique prefix, its hex part)."""
    row = store.get(resolve_run(store, text, paths))
    if row is None:  # found only as a bundle: the caller needs its queue row
        raise NotFound(f"run {text} has no queue row in project {paths.project}",
                       code="run_not_found")
    return row
