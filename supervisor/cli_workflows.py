"""The ``workflows`` and ``validate`` commands: inspecting workflow definitions.

Owns listing the catalog (project and global definitions, shadowing, load
errors) and checking one workflow file. ``register(app)`` adds both commands
to the CLI. Imports ``protocol`` only; never the worker.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from ..protocol.discovery import (
    SUFFIX,
    Catalog,
    CatalogEntry,
    WorkflowLoadError,
    discover_for,
    load_workflow_file,
    workflow_dirs,
)
from ..protocol.errors import ExitCode
from ..protocol.settings import Settings
from .cli_options import JsonOpt, ProjectOpt, emit_json, project_context

_FileArg = Annotated[str, typer.Argument(
    metavar="FILE", show_default=False,
    help="The workflow file to check, or the name of one of the project's (or the global)"
         " workflows.")]


def _debug() -> bool:
    return os.environ.get("PI_WORKFLOWS_DEBUG") == "1"


def _short(digest: str) -> str:
    return digest.split(":", 1)[-1][:12]


def _print_catalog(catalog: Catalog) -> None:
    good = [e for e in catalog.entries if e.loaded is not None]
    bad = [e for e in catalog.entries if e.loaded is None]
    if not catalog.entries:
        typer.echo(f"no workflows (looked in {catalog.project_dir} and {catalog.global_dir})")
        return
    if good:
        width = max(len(e.name) for e in good)
        for entry in good:
            assert entry.loaded is not None
            flag = " (shadowed)" if entry.shadowed else ""
            typer.echo(f"{entry.name:<{width}}  {entry.scope:<7}  {_short(entry.loaded.digest)}"
                       f"  {entry.path}{flag}")
            description = entry.loaded.workflow.description.strip()
            if description:
                typer.echo(f"{'':<{width}}  {description.splitlines()[0]}")
    for entry in bad:
        _print_error(entry)


def _print_error(entry: CatalogEntry) -> None:
    assert entry.error is not None
    flag = " (shadowed)" if entry.shadowed else ""
    typer.echo(f"error: {entry.name} ({entry.scope}{flag}) {entry.path}: {entry.error.reason}")
    if len(entry.error.problems) > 1:
        for problem in entry.error.problems:
            typer.echo(f"  - {problem}")


def workflows(project: ProjectOpt = Path("."), as_json: JsonOpt = False) -> None:
    """List the workflow definitions a project can run, and files that fail to load.

    Example: pi-workflows workflows --json
    """
    settings, paths = project_context(project)
    catalog = discover_for(settings, paths.project)
    if _debug():
        for entry in catalog.entries:
            if entry.error is not None and entry.error.debug_traceback:
                sys.stderr.write(f"{entry.path}:\n{entry.error.debug_traceback}")
    if as_json:
        emit_json(catalog.as_json())
    else:
        _print_catalog(catalog)


def _workflow_file(settings: Settings, project: Path, file: str) -> Path:
    """FILE as given, or a bare workflow name found in the project's, then the global, dir."""
    given = Path(file).expanduser()
    if given.exists() or "/" in file or file.endswith(".py"):
        return given
    for directory in workflow_dirs(settings, project):
        candidate = directory / f"{file}{SUFFIX}"
        if candidate.is_file():
            return candidate
    return given


def validate(file: _FileArg, project: ProjectOpt = Path("."), as_json: JsonOpt = False) -> None:
    """Check one workflow file: prints "ok NAME DIGEST", or one line per problem.

    FILE may also be a workflow's name: the project's definition, else the
    global one (--project names the project).

    Example: pi-workflows validate .pi/workflows/review.workflow.py
    """
    settings, paths = project_context(project)
    file_path = _workflow_file(settings, paths.project, file)
    try:
        loaded = load_workflow_file(file_path)
    except WorkflowLoadError as exc:
        if _debug() and exc.debug_traceback:
            sys.stderr.write(exc.debug_traceback)
        if as_json:
            emit_json({"ok": False, "path": str(file_path), "error": exc.reason,
                        "problems": exc.problems})
        for problem in exc.problems:
            sys.stderr.write(f"{file_path}: {' '.join(problem.split())}\n")
        raise typer.Exit(int(ExitCode.USAGE)) from None
    if as_json:
        emit_json({"ok": True, "name": loaded.name, "digest": loaded.digest,
                    "path": loaded.source.path, "sourceSha256": loaded.source.sha256})
    else:
        typer.echo(f"ok {loaded.name} {loaded.digest}")


def register(app: typer.Typer) -> None:
    """Add the ``workflows`` and ``validate`` commands to the CLI."""
    app.command("workflows")(workflows)
    app.command("validate")(validate)
