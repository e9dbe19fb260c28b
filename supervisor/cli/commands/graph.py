"""The ``graph`` command: a workflow's graph, or a run's with its node states, as a picture.

Owns reading what to draw: a workflow file or name (imported in a child of
its own, as ``validate`` does: ``cli.isolated``) or a RUN (its bundle's
``workflow.json``, its states from ``views.graph.states``), and writing the
drawing (``views.graph``: text, SVG or DOT) to stdout or a private file.
``register(app)`` adds the command. Reads only. Must not import the worker or
another command module.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ....protocol.atomic import write_atomic
from ....protocol.bundle import Bundle, BundleCorrupt
from ....protocol.definitions.discovery import (
    workflow_file_for,
)
from ....protocol.errors import NotFound, UsageError
from ....protocol.paths import Paths
from ....protocol.settingspec import SettingsLike
from ....protocol.store import open_store, store_present
from ...views.graph.dot import render_dot
from ...views.graph.layout import layout, node_list
from ...views.graph.states import node_states
from ...views.graph.svg import render_svg
from ...views.graph.text import render_text
from ...views.runref import resolve_run
from ...views.wording import cli
from ..completion import workflow_names
from ..isolated import load_summary, snapshot_summary
from ..options import ProjectOpt, project_context, terminal_columns

FORMATS = ("text", "svg", "dot")


def _from_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise NotFound(f"no workflow file {path}", code="workflow_not_found")
    summary = load_summary(str(path), summarize=snapshot_summary)
    if not summary["ok"]:
        if os.environ.get("PI_WORKFLOWS_DEBUG") == "1" and summary.get("traceback"):
            sys.stderr.write(summary["traceback"])
        problems = "; ".join(" ".join(p.split()) for p in summary["problems"])
        raise UsageError(f"{path}: {problems}", code="workflow_invalid")
    found: dict[str, Any] = summary["snapshot"]
    return found


def _from_run(settings: SettingsLike, paths: Paths, text: str
              ) -> tuple[dict[str, Any], dict[str, str]]:
    try:
        if store_present(settings, paths.store_file):
            with open_store(settings, paths.store_file) as store:
                run_id = resolve_run(store, text, paths)
        else:
            run_id = resolve_run(None, text, paths)
    except UsageError as exc:
        if exc.code == "run_ambiguous":
            raise
        raise NotFound(f"no workflow and no run named {text} in project {paths.project}"
                       f" (`{cli(paths.project, 'workflows')}` and `{cli(paths.project, 'list')}`"
                       " show them)", code="graph_not_found") from None
    bundle = Bundle(paths.runs_dir, run_id)
    try:
        snap = bundle.snapshot()
        raw = bundle.raw_state()
        events = bundle.events()
    except (BundleCorrupt, OSError, ValueError) as exc:
        raise UsageError(f"run {run_id}: its bundle cannot be read ({exc})",
                         code="bundle_unreadable") from None
    ids = [n["id"] for n in node_list(snap)]
    return snap, node_states(dict(raw), events, nodes=ids)


def graph_command(
    target: Annotated[str, typer.Argument(
        metavar="WORKFLOW|RUN", show_default=False, autocompletion=workflow_names,
        help="A workflow file, a workflow's name (the project's, else the global one), or a"
             " run id (a unique prefix or its trailing hex part): a run's graph shows each"
             " node's state.")],
    fmt: Annotated[str, typer.Option(
        "--format", metavar="FORMAT", show_default=False,
        help="text (the default: boxes in the terminal; one line per node when wider than"
             " it), svg (a standalone image) or dot (Graphviz).")] = "text",
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", metavar="FILE", show_default=False,
        help="Write the drawing to FILE (private, 0600) instead of stdout.")] = None,
    project: ProjectOpt = Path("."),
) -> None:
    """Draw a workflow's graph, or a run's with the state of each node.

    The layout is the one the dashboard shows: nodes ranked from the start,
    loops drawn as back edges, a switch's cases as edge labels, an include's
    nodes framed together (svg, dot).

    Example: pi-workflows graph review --format svg --output review.svg
    """
    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}",
                         code="bad_format")
    settings, paths = project_context(project)
    path = workflow_file_for(settings, paths.project, target)
    states: dict[str, str] | None = None
    if path is not None:
        snap = _from_file(path)
    else:
        snap, states = _from_run(settings, paths, target)
    if fmt == "dot":
        drawn = render_dot(snap, states)
    elif fmt == "svg":
        drawn = render_svg(layout(snap), states)
    else:
        drawn = render_text(layout(snap), states, width=None if output else terminal_columns())
    if output is None:
        sys.stdout.write(drawn)
        return
    try:
        write_atomic(output.expanduser(), drawn.encode(), sync=False)
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror or exc}",
                         code="output_unwritable") from None


def register(app: typer.Typer) -> None:
    """Add the ``graph`` command to the CLI."""
    app.command("graph")(graph_command)
