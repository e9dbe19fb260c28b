"""Shell completion for bash, zsh and fish: the scripts, installing them, and the candidates.

Owns the root options ``--show-completion [SHELL]`` and
``--install-completion [SHELL]`` (typer's own take no shell: they always
wrote the script of the shell they detected, so asking for zsh or fish gave
bash), the script of each shell (typer's completion classes, which speak
the protocol typer's ``_PI_WORKFLOWS_COMPLETE`` handler answers), and what
a TAB offers for the arguments that name a run (the store's run ids, newest
first) or a workflow (the workflow files' names, none of them imported).
A completer never fails: no project, no store, broken settings or a store
it cannot read all offer nothing. Imports typer, and ``protocol`` only
inside the functions that use it (``cli.options`` imports this module for
every command); never a command module or another wing.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import typer

PROG = "pi-workflows"
COMPLETE_VAR = "_PI_WORKFLOWS_COMPLETE"
SHELLS = ("bash", "zsh", "fish")
OPTIONS = ("--show-completion", "--install-completion")
MAX_CANDIDATES = 50  # a TAB lists a screenful, not the whole store


class _UnknownShell(Exception):
    """Neither given nor detectable: the option's callback words it."""


def detect_shell() -> str:
    """The shell this command was started from, by its process tree, else ``$SHELL``."""
    name = ""
    try:
        # typer's own dependency for this very question (untyped: imported by name).
        shellingham = importlib.import_module("shellingham")
        name = str(shellingham.detect_shell()[0])
    except Exception:  # not installed, or no shell among the parents
        name = Path(os.environ.get("SHELL", "")).name
    return name


def with_shell(args: list[str]) -> list[str]:
    """``args`` with the detected shell after a completion option given without one.

    The vendored click cannot take an option whose value is optional, so a
    bare ``--show-completion`` gets its value here, before parsing.
    """
    out = list(args)
    for i, word in enumerate(out):
        if not word.startswith("-") or word == "--":
            break  # past the root options: the command's words are its own
        if word in OPTIONS and (i + 1 == len(out) or out[i + 1].startswith("-")):
            out.insert(i + 1, detect_shell() or "?")
            break
    return out


def prepare() -> None:
    """Register typer's completion classes when a shell asks for candidates (they parse
    ``complete_zsh``/``complete_fish`` and read the words their scripts send)."""
    if COMPLETE_VAR in os.environ:
        from typer._completion_classes import completion_init

        completion_init()


def _shell(value: str, option: str) -> str:
    from ...protocol.errors import UsageError

    if value not in SHELLS:
        told = "could not tell which shell this is" if value in ("", "?") else \
            f"unknown shell {value[:20]!r}"
        raise UsageError(f"{option}: {told}; give one of {', '.join(SHELLS)}, such as"
                         f" {option} zsh", code="unknown_shell")
    return value


def script(shell: str) -> str:
    """The completion script of ``shell``, to be sourced by it."""
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell)


def show(value: str | None) -> None:
    if value is None:
        return
    typer.echo(script(_shell(value, "--show-completion")))
    raise typer.Exit()


def install(value: str | None) -> None:
    if value is None:
        return
    from typer._completion_shared import install as install_script

    shell, path = install_script(shell=_shell(value, "--install-completion"), prog_name=PROG,
                                 complete_var=COMPLETE_VAR)
    typer.echo(f"{shell} completion installed in {path}; it takes effect in a new shell")
    raise typer.Exit()


# ---- candidates ----------------------------------------------------------------


def _project(ctx: typer.Context) -> Path:
    value = ctx.params.get("project")
    return Path(value) if isinstance(value, (str, Path)) else Path(".")


def run_ids(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    """Run ids that start with what was typed, newest first, each with its workflow."""
    try:
        from ...protocol.leansettings import current_settings
        from ...protocol.paths import resolve_paths
        from ...protocol.store import open_store

        settings = current_settings()
        paths = resolve_paths(settings, _project(ctx))
        if not (settings.store_url or paths.store_file.is_file()):
            return []  # opening would create a store
        with open_store(settings, paths.store_file) as store:
            ids = store.recent_run_ids(incomplete, limit=MAX_CANDIDATES)
    except Exception:  # completion offers nothing rather than a traceback in the prompt
        return []
    # TIMESTAMP-WORKFLOW-HEX: the middle is the workflow (its name may hold a -).
    return [(run_id, run_id.partition("-")[2].rpartition("-")[0]) for run_id in ids]


def workflow_names(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    """The names of the project's and the global workflow files that start with it."""
    try:
        from ...protocol.definitions.discovery import catalog_files, workflow_dirs
        from ...protocol.leansettings import current_settings

        local, shared = workflow_dirs(current_settings(), _project(ctx))
        found: dict[str, str] = {}
        for entry in catalog_files(local, shared):
            if entry.name.startswith(incomplete):
                found.setdefault(entry.name, f"{entry.scope} workflow")
    except Exception:
        return []
    return list(found.items())[:MAX_CANDIDATES]
