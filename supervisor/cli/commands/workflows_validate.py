"""The ``workflows`` and ``validate`` commands: inspecting workflow definitions.

Owns listing the catalog (project and global definitions, shadowing, load
errors) and checking one workflow file, each file imported in a child of
its own (``cli.isolated``). ``register(app)`` adds both commands. Imports
``protocol`` and ``cli``'s shared modules; must not import the worker or
another command module.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ....protocol.definitions.discovery import (
    SUFFIX,
    catalog_files,
    workflow_dirs,
    workflow_file_for,
)
from ....protocol.errors import ExitCode, NotFound
from ....protocol.settingspec import SettingsLike
from ...views.wording import cli
from ..completion import workflow_names
from ..isolated import load_summary
from ..options import JsonOpt, ProjectOpt, emit_json, project_context

_FileArg = Annotated[str, typer.Argument(
    metavar="FILE", show_default=False, autocompletion=workflow_names,
    help="The workflow file to check, or the name of one of the project's (or the global)"
         " workflows.")]


def _debug() -> bool:
    return os.environ.get("PI_WORKFLOWS_DEBUG") == "1"


def _short(digest: str) -> str:
    return digest.split(":", 1)[-1][:12]


def _listing(settings: SettingsLike, project: Path) -> dict[str, Any]:
    """The ``workflows --json`` shape, each file imported in a child of its own."""
    local, shared = workflow_dirs(settings, project)
    ok: list[dict[str, Any]] = []
    bad: list[dict[str, Any]] = []
    for f in catalog_files(local, shared):
        entry: dict[str, Any] = {"name": f.name, "path": str(f.path), "scope": f.scope,
                                 "shadowed": f.shadowed}
        summary = load_summary(str(f.path))
        if summary["ok"]:
            ok.append({**entry, "digest": summary["digest"],
                       "sourceSha256": summary["sourceSha256"],
                       "description": summary["description"]})
        else:
            if _debug() and summary.get("traceback"):
                sys.stderr.write(f"{f.path}:\n{summary['traceback']}")
            bad.append({**entry, "error": summary["error"], "problems": summary["problems"]})
    return {"projectDir": str(local), "globalDir": str(shared), "workflows": ok, "errors": bad}


def _print_catalog(listing: dict[str, Any]) -> None:
    good, bad = listing["workflows"], listing["errors"]
    if not good and not bad:
        typer.echo(f"no workflows (looked in {listing['projectDir']} and"
                   f" {listing['globalDir']})")
        return
    if good:
        width = max(len(e["name"]) for e in good)
        for entry in good:
            flag = " (shadowed)" if entry["shadowed"] else ""
            typer.echo(f"{entry['name']:<{width}}  {entry['scope']:<7}"
                       f"  {_short(entry['digest'])}  {entry['path']}{flag}")
            description = (entry["description"] or "").strip()
            if description:
                typer.echo(f"{'':<{width}}  {description.splitlines()[0]}")
    for entry in bad:
        flag = " (shadowed)" if entry["shadowed"] else ""
        typer.echo(f"error: {entry['name']} ({entry['scope']}{flag}) {entry['path']}:"
                   f" {entry['error']}")
        if len(entry["problems"]) > 1:
            for problem in entry["problems"]:
                typer.echo(f"  - {problem}")


def workflows(project: ProjectOpt = Path("."), as_json: JsonOpt = False) -> None:
    """List the workflow definitions a project can run, and files that fail to load.

    Each file is imported in a process of its own, within the load bound: a
    file that hangs or exits at import is listed as an error.

    Example: pi-workflows workflows --json
    """
    settings, paths = project_context(project)
    listing = _listing(settings, paths.project)
    if as_json:
        emit_json(listing)
    else:
        _print_catalog(listing)


def _workflow_file(settings: SettingsLike, project: Path, file: str) -> Path:
    """FILE as given, or a bare workflow name found in the project's, then the global, dir."""
    found = workflow_file_for(settings, project, file)
    if found is not None:
        return found
    dirs = workflow_dirs(settings, project)
    # Neither a file nor a name: say where a name was looked for, not just "not found".
    raise NotFound(f"no file {file!r} and no workflow named {file!r} (looked for"
                   f" {file}{SUFFIX} in {dirs[0]} and {dirs[1]}); see"
                   f" `{cli(project, 'workflows')}`",
                   code="workflow_not_found")


def validate(file: _FileArg, project: ProjectOpt = Path("."), as_json: JsonOpt = False) -> None:
    """Check one workflow file: prints "ok NAME DIGEST", or one line per problem.

    FILE may also be a workflow's name: the project's definition, else the
    global one (--project names the project). The file is imported in a
    process of its own, within the load bound.

    Example: pi-workflows validate .pi/workflows/review.workflow.py
    """
    settings, paths = project_context(project)
    file_path = _workflow_file(settings, paths.project, file)
    summary = load_summary(str(file_path))
    if not summary["ok"]:
        if _debug() and summary.get("traceback"):
            sys.stderr.write(summary["traceback"])
        if as_json:
            emit_json({"ok": False, "path": str(file_path), "error": summary["error"],
                       "problems": summary["problems"]})
        for problem in summary["problems"]:
            sys.stderr.write(f"{file_path}: {' '.join(problem.split())}\n")
        raise typer.Exit(int(ExitCode.USAGE)) from None
    if as_json:
        emit_json({"ok": True, "name": summary["name"], "digest": summary["digest"],
                   "path": summary["path"], "sourceSha256": summary["sourceSha256"]})
    else:
        typer.echo(f"ok {summary['name']} {summary['digest']}")


def register(app: typer.Typer) -> None:
    """Add the ``workflows`` and ``validate`` commands to the CLI."""
    app.command("workflows")(workflows)
    app.command("validate")(validate)
