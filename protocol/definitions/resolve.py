"""Finding the workflow an ``include`` names: an object, a workflow name or a path.

Owns turning each include marker into a loaded child (a ``Workflow``, the
files it brought in with their sha256, or one clear problem), refusing an
include cycle with the chain of files. A name is looked up as discovery
finds a project's workflows: beside the including file (its workflows
directory), then ``<cwd>/.pi/workflows``, then ``~/.pi/agent/workflows``.
Imports ``protocol.definitions.discovery`` and ``protocol.definitions.graph``;
must not import ``worker`` or ``supervisor``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from .discovery import PROJECT_SUBDIR, SUFFIX, WorkflowLoadError, load_workflow_file, loading
from .graph import IncludedFile, IncludeNode, Workflow

Resolved = tuple[Workflow | None, list[IncludedFile], str | None]


def _looks_like_path(child: str) -> bool:
    return child.endswith(".py") or os.sep in child or child.startswith(".")


def _by_name(name: str, base: Path) -> Path | None:
    for directory in (base, Path.cwd() / PROJECT_SUBDIR,
                      Path("~/.pi/agent/workflows").expanduser()):
        candidate = directory / f"{name}{SUFFIX}"
        if candidate.is_file():
            return candidate
    return None


def resolve_one(marker: IncludeNode) -> Resolved:
    """The child of one include, the files it pins, or the problem that stops it."""
    where = f"include {marker.id!r}"
    child = marker.child
    if isinstance(child, Workflow):
        return child, [], None
    if not isinstance(child, str | os.PathLike) or not os.fspath(child):
        return None, [], (f"{where}: the child must be a Workflow, a workflow name or a path,"
                          f" got {type(child).__name__}")
    base = Path(marker.base) if marker.base else Path.cwd()
    text = os.fspath(child)
    if isinstance(child, os.PathLike) or _looks_like_path(text):
        path: Path | None = base / text
        assert path is not None
        if not path.is_file():
            return None, [], f"{where}: no workflow file {text!r} (relative to {base})"
    else:
        path = _by_name(text, base)
        if path is None:
            return None, [], (f"{where}: no workflow named {text!r} (looked beside the"
                              " including file, in .pi/workflows and in ~/.pi/agent/workflows)")
    real = os.path.realpath(path)
    chain = loading()
    if real in chain:
        names = [os.path.basename(p) for p in chain[chain.index(real):]] + [path.name]
        return None, [], f"{where}: include cycle: {' -> '.join(names)}"
    try:
        # No time bound of its own: the including file's import is bounded already.
        loaded = load_workflow_file(real, timeout_s=0)
    except WorkflowLoadError as exc:
        return None, [], f"{where}: cannot load {text}: {exc.reason}"
    wf = loaded.workflow
    # The child's own includes are added, under this mount, when it is compiled.
    return wf, [IncludedFile(marker.id, wf.name, loaded.source.path, loaded.source.sha256)], None


def resolve_all(raw_nodes: Sequence[object]) -> dict[str, Resolved]:
    """Every include marker of ``raw_nodes`` resolved, by mount name."""
    return {node.id: resolve_one(node) for node in raw_nodes
            if isinstance(node, IncludeNode) and isinstance(node.id, str)}
