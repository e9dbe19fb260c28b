"""Finding and importing ``NAME.controller.py`` files.

Owns the controller file suffix, scanning the directories workflows live in
(``<project>/.pi/workflows`` and the global one, a project file shadowing a
global one of the same name), and importing one file within the load bound
(``protocol.definitions.discovery``'s import, time bound and error wording):
the file defines exactly one ``Controller`` whose ``name=`` matches the file
name. A caller that must survive the file (the CLI) imports it in a child
process (``supervisor.cli.isolated``); a controller worker is such a child.
Imports ``protocol.definitions.discovery`` and ``protocol.controllers.define``;
must not import ``worker`` or ``supervisor``.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..definitions.discovery import WorkflowLoadError, _execute, load_timeout, workflow_dirs
from ..definitions.graph import DefinitionError
from .define import Controller, name_problems

if TYPE_CHECKING:
    from ..settingspec import SettingsLike

SUFFIX = ".controller.py"
Scope = Literal["project", "global"]


class ControllerLoadError(DefinitionError):
    """A controller file could not be loaded: ``path`` and a one-line ``reason``."""

    code = "controller_invalid"

    def __init__(self, path: str, reason: str, problems: list[str] | None = None) -> None:
        self.path = path
        self.reason = reason
        super().__init__(problems or [reason])
        self.args = (f"{path}: {reason}",)


@dataclass(frozen=True)
class LoadedController:
    controller: Controller
    path: str
    sha256: str

    @property
    def name(self) -> str:
        return self.controller.name


@dataclass(frozen=True)
class ControllerFile:
    """A controller file found in a directory, before it is imported."""

    name: str
    path: Path
    scope: Scope
    shadowed: bool


def controller_name_for(path: Path) -> str:
    base = path.name
    return base[: -len(SUFFIX)] if base.endswith(SUFFIX) and len(base) > len(SUFFIX) else base


def _scan(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.glob("*" + SUFFIX) if p.is_file())
    except OSError:
        return []


def controller_files(local: Path, shared: Path) -> list[ControllerFile]:
    """The controller files of both directories, by name, a project file first."""
    files = [ControllerFile(controller_name_for(p), p, "project", False) for p in _scan(local)]
    seen = {f.name for f in files}
    if os.path.realpath(shared) != os.path.realpath(local):
        files += [ControllerFile(controller_name_for(p), p, "global",
                                 controller_name_for(p) in seen) for p in _scan(shared)]
    files.sort(key=lambda f: (f.name, f.scope != "project"))
    return files


def controller_files_for(settings: SettingsLike, project: Path | str) -> list[ControllerFile]:
    return controller_files(*workflow_dirs(settings, project))


def load_controller_file(path: Path | str, *, timeout_s: float | None = None) -> LoadedController:
    """Import one controller file (within the load bound) and return its definition."""
    shown, real = str(path), os.path.realpath(path)
    try:
        with open(real, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise ControllerLoadError(shown, "file not found") from None
    except OSError as exc:
        raise ControllerLoadError(shown, f"cannot read the file: {exc.strerror or exc}") from None
    stem = controller_name_for(Path(shown))
    if problems := name_problems(stem):
        raise ControllerLoadError(shown, f"the file name gives the controller name: {problems[0]}")
    try:
        module = _execute(shown, real, data, load_timeout() if timeout_s is None else timeout_s)
    except WorkflowLoadError as exc:
        reason = exc.reason.replace("invalid workflow definition", "invalid controller definition")
        problems = list(exc.problems) if len(exc.problems) > 1 else [reason]
        raise ControllerLoadError(shown, reason, problems) from None
    found = {id(v): (k, v) for k, v in vars(module).items() if isinstance(v, Controller)}
    if not found:
        raise ControllerLoadError(shown, "the file defines no controller; assign `controller ="
                                         " define_controller(...)` at module level")
    if len(found) > 1:
        names = ", ".join(k for k, _ in found.values())
        raise ControllerLoadError(shown, f"the file defines {len(found)} controllers ({names});"
                                         " a controller file defines exactly one")
    controller = next(iter(found.values()))[1]
    if controller.name != stem:
        raise ControllerLoadError(shown, f"controller name {controller.name!r} does not match the"
                                         f" file name {stem!r}; rename the file to"
                                         f" {controller.name}{SUFFIX}")
    return LoadedController(controller, real, hashlib.sha256(data).hexdigest())


def load_active_in(local: Path, shared: Path,
                   ) -> tuple[dict[str, LoadedController], dict[str, ControllerLoadError]]:
    """Every active (not shadowed) controller file imported: (loaded, errors) by name."""
    loaded: dict[str, LoadedController] = {}
    errors: dict[str, ControllerLoadError] = {}
    for f in controller_files(local, shared):
        if f.shadowed:
            continue
        try:
            loaded[f.name] = load_controller_file(f.path)
        except ControllerLoadError as exc:
            errors[f.name] = exc
    return loaded, errors
