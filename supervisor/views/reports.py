"""What ``status`` and ``list`` report, computed without typer or pydantic.

Owns turning a command's arguments into the exact object ``status --json``
and ``list --json`` print (and the human output is drawn from), so the typer
commands (``supervisor.cli.commands.status_list``) and the fast command line
(``supervisor.cli.main``) give the same answers from one code path. Imports
``protocol`` and the views wing; never another wing.
"""

from __future__ import annotations

import json
from typing import Any

from ...protocol.clock import now_ms
from ...protocol.errors import PiWorkflowsError, UsageError
from ...protocol.paths import Paths
from ...protocol.settingspec import SettingsLike
from ...protocol.states import TERMINAL, QueueState
from ...protocol.store import Store, open_store, store_present
from .holds import chat_hold, hold_text
from .listing import check_state, select
from .runref import existing_row, project_store
from .status import host_running, node_states, run_status, status_with_chain
from .timefmt import parse_duration


def status_data(settings: SettingsLike, paths: Paths, run: str | None,
                owner: str | None, *, nodes: bool = False) -> dict[str, Any]:
    """RUN's status with its chain; else ``{"session", "run"}``; else ``{"runs"}``.
    ``nodes``: RUN's (or the session's run's) ``nodes`` too (``views.status.node_states``)."""
    with project_store(settings, paths) as store:
        if run is not None:
            info = with_agent_dir(store, paths, status_with_chain(
                store, existing_row(store, run, paths), paths.runs_dir))
            if nodes:
                info["nodes"] = node_states(paths.runs_dir, info["runId"])
            if info["queueState"] == QueueState.PARKED:
                info["hostRunning"] = host_running(store)  # as `sync` reports it
            return info
        if owner is not None:
            mine = store.session_run(owner)
            found = None if mine is None else with_agent_dir(
                store, paths, run_status(mine, paths.runs_dir))
            if found is not None and nodes:
                found["nodes"] = node_states(paths.runs_dir, found["runId"])
            if found is not None and mine is not None:
                # Whether the session started it (its origin) or is only told about it.
                found["sessionRole"] = "origin" if mine.origin_session == owner else "notify"
                if found["queueState"] == QueueState.PARKED:
                    found["hostRunning"] = host_running(store)  # as `sync` reports it
            return {"session": owner, "run": found, "controllersNotReady": _not_ready(store)}
        # Unfinished runs, and runs that wait for an answer (done in the queue).
        rows = [r for r in store.list_runs() if r.state not in TERMINAL]
        rows += store.waiting_runs()
        rows.sort(key=lambda r: (r.created_at, r.run_id))
        forks = store.forks_of([r.run_id for r in rows])
        return {"runs": [with_agent_dir(store, paths, run_status(r, paths.runs_dir,
                                                                  forks.get(r.run_id)))
                         for r in rows]}


def _not_ready(store: Store) -> int:
    """The Pi footer's count of controller resources not Ready: one COUNT, 0 when
    the store cannot tell (an older store read without its controller tables)."""
    try:
        return store.count_not_ready()
    except PiWorkflowsError:
        return 0


def with_agent_dir(store: Store, paths: Paths, info: dict[str, Any]) -> dict[str, Any]:
    """``heldBy`` while ``chat`` holds the run (``{"kind", "pid", "since", "text"}``);
    ``agentDir``: the Pi agent dir the run's agent steps use, and ``agentDirFrom``:
    ``run`` (recorded when it was queued), or ``host`` (the running host's own; null
    when it has none, or no host runs: then Pi's default)."""
    row = store.get(info["runId"])
    if row is not None and (hold := chat_hold(store, row)) is not None:
        info["heldBy"] = {**hold, "text": hold_text(hold)}
    recorded = store.launch_agent_dir(info["runId"])
    if recorded is not None:
        info.update(agentDir=recorded, agentDirFrom="run")
        return info
    try:
        host = json.loads(paths.host_lock.read_text() or "{}")
    except (OSError, ValueError):
        host = {}
    value = host.get("agentDir") if isinstance(host, dict) else None
    info.update(agentDir=value if isinstance(value, str) else None, agentDirFrom="host")
    return info


def list_data(settings: SettingsLike, paths: Paths, *, state: str | None, workflow: str | None,
              since: str | None, limit: int | None, until: str | None = None,
              offset: int = 0) -> list[dict[str, Any]]:
    """The runs ``list`` shows, newest first (no store yet: none)."""
    check_state(state)
    since_ms, until_ms = _window(since, until)
    if not store_present(settings, paths.store_file):
        return []
    with open_store(settings, paths.store_file) as store:
        return select(store, paths.runs_dir, state=state, workflow=workflow,
                      since_ms=since_ms, until_ms=until_ms, limit=limit, offset=offset)


def _window(since: str | None, until: str | None) -> tuple[int | None, int | None]:
    """``--since`` and ``--until`` as creation times; refused when nothing could match."""
    since_s = None if since is None else parse_duration(since, "--since")
    until_s = None if until is None else parse_duration(until, "--until")
    if since is not None and until is not None and (until_s or 0) > (since_s or 0):
        raise UsageError(f"--until {until[:40]!r} is further back than --since {since[:40]!r}:"
                         " no run could match (--since is the older bound)",
                         code="invalid_window")
    now = now_ms()
    return (None if since_s is None else now - int(since_s * 1000),
            None if until_s is None else now - int(until_s * 1000))
