"""What every CLI command shares: the --project and --json options, settings, JSON output.

Imports typer and ``protocol.settings`` only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ..protocol.settings import Paths, Settings, load_settings, resolve_paths

ProjectOpt = Annotated[
    Path,
    typer.Option("--project", help="Project directory (default: the current directory).",
                 show_default=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def project_context(project: Path | None) -> tuple[Settings, Paths]:
    settings = load_settings()
    return settings, resolve_paths(settings, project or Path.cwd())


def emit_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, sort_keys=True))
