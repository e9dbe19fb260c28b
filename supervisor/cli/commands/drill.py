"""The ``drill`` command: a seeded kill -9 drill against a scratch project.

Owns parsing ``drill``'s options and printing its summary (or the report
as JSON); the drill itself is ``supervisor.drill``. ``register(app)`` adds
the command. Imports typer, ``protocol.errors`` and the drill; must not
import the worker or another command module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ....protocol.errors import UsageError
from ..options import JsonOpt, emit_json


def drill_command(
    project: Annotated[Path, typer.Option(
        "--project", metavar="DIR", show_default=False,
        help="A scratch project the drill creates and owns: new, empty, or an earlier"
             " drill's (it is emptied first); any other directory is refused.")],
    report: Annotated[Path, typer.Option(
        "--report", metavar="FILE", show_default=False,
        help="Where to write the JSON report (0600).")],
    iterations: Annotated[int, typer.Option(
        "--iterations", min=1, metavar="N", help="Iterations of work and faults.")] = 20,
    seed: Annotated[int, typer.Option("--seed", metavar="S",
                                      help="Seed for every random choice.")] = 0,
    faults: Annotated[str, typer.Option(
        "--faults", metavar="KIND[,KIND...]", show_default=False,
        help="Inject only these fault kinds (docs/drills.md lists them), for example"
             " clock_step or runs_disk_full; default: every kind.")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Run workflows under kill -9s, drains, stops, store locks and clock steps; check invariants.

    Every iteration starts detached, session and deferred runs (agent steps too
    when Pi is installed), injects faults chosen from the seed, and checks the
    durable state (store, bundles, ledger, processes). Exit 0 with no
    violation, 1 with any (the report lists them), 2 for bad usage.

    Example: pi-workflows drill --iterations 200 --seed 7 --project /tmp/drill --report drill.json
    """
    from ...drill.faults import KINDS
    from ...drill.runner import Options, run_drill

    kinds = frozenset(k.strip() for k in faults.split(",") if k.strip())
    if unknown := sorted(kinds - set(KINDS)):
        raise UsageError(f"--faults: unknown kind(s) {', '.join(unknown)}; use"
                         f" {', '.join(KINDS)}")

    target = report.expanduser().absolute()
    root = project.expanduser().absolute()
    if target == root or root in target.parents:
        raise UsageError(f"--report {report} must be outside the drill's project {project}")
    if target.is_dir() or not target.parent.is_dir():
        raise UsageError(f"--report {report}: not a file in an existing directory")
    result = run_drill(Options(iterations, seed, root, target, kinds), typer.echo)
    if as_json:
        emit_json(result.as_json())
    else:
        for line in result.summary():
            typer.echo(line)
        typer.echo(f"report: {target}")
    if result.violations:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("drill")(drill_command)
