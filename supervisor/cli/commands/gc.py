"""The ``gc`` command: remove settled runs older than a duration, whole chains only.

Owns parsing ``gc``'s options and printing its report; the rules and the
removal are ``supervisor.maint.gc``. ``register(app)`` adds the command.
Must not import the worker or another command module.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from ....protocol.clock import now_ms
from ....protocol.store import store_present
from ....protocol.tempdirs import sweep_tempdirs
from ...maint.gc import Report, collect_garbage, format_bytes, gc_store, parse_duration
from ...views.timefmt import duration
from ..options import JsonOpt, ProjectOpt, emit_json, project_context

_KEPT_WORDS = {"open": "in an open chain", "waiting": "waiting at a checkpoint",
               "undelivered": "with undelivered messages", "recent": "chained to a newer run",
               "in_use": "in use", "unsafe": "not safe to delete", "changed": "changed meanwhile"}


def _summary(report: Report) -> str:
    verb = "would remove" if report.dry_run else "removed"
    if report.removed:
        size = format_bytes(sum(r.bytes for r in report.removed))
        head = (f"{verb} {len(report.removed)} run(s) in {report.chains} chain(s),"
                f" {size} of bundles")
    else:
        head = f"nothing to remove: no settled run older than {report.older_than} may go"
    if report.kept:
        counts = Counter(k.reason for k in report.kept)
        why = ", ".join(f"{n} {_KEPT_WORDS.get(str(code), str(code))}"
                        for code, n in sorted(counts.items()))
        head += f"; kept {len(report.kept)} older settled run(s): {why} (--json says why)"
    return head


def gc_command(
    older_than: Annotated[str, typer.Option(
        "--older-than", metavar="DURATION", show_default=False,
        help="Remove runs settled longer ago than this: 30d, 12h, 90m, 45s or 2w.")],
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print what would be removed and change nothing.")] = False,
    now: Annotated[int | None, typer.Option("--now-ms", hidden=True)] = None,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Remove settled runs (their queue rows and bundles) older than DURATION.

    A run goes only with its whole chain (continuations, forks), when every
    run of it ended (completed, failed, timed out or cancelled: not queued,
    running, parked or waiting at a checkpoint), settled before the cutoff,
    and its sessions have received all its messages.

    Example: pi-workflows gc --older-than 30d --dry-run
    """
    parse_duration(older_than)  # a bad duration is refused before anything is opened
    settings, paths = project_context(project)
    at = now_ms() if now is None else now
    if not store_present(settings, paths.store_file):
        report = Report(dry_run, older_than, at - parse_duration(older_than), at)
        if not dry_run:  # no runs, but a dead worker's temporary directories may be left
            report.temp_dirs = sweep_tempdirs()
    else:
        with gc_store(settings, paths.store_file) as store:
            report = collect_garbage(store, paths, older_than=older_than, now=at,
                                     dry_run=dry_run)
    if as_json:
        emit_json(report.as_json())
        return
    verb = "would remove" if dry_run else "removed"
    if report.finished:
        typer.echo(f"finished removing {len(report.finished)} run(s) an interrupted gc left")
    for line in report.removed:
        typer.echo(f"{verb} {line.run_id}  {line.workflow}  {line.state}"
                   f"  settled {duration(line.age_ms)} ago")
    if report.temp_dirs:
        typer.echo(f"removed {report.temp_dirs} temporary directory(ies) of dead workers")
    if report.controller_events:
        typer.echo(f"{verb} {report.controller_events} event(s) of deleted controller"
                   " resources")
    typer.echo(_summary(report))


def register(app: typer.Typer) -> None:
    app.command("gc")(gc_command)
