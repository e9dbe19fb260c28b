"""Loading workflow files and discovering the definitions a project can run.

Owns: importing one ``*.workflow.py`` file safely (unique module name, every
failure a ``WorkflowLoadError`` with the path and a one-line reason), the
source identity (sha256 of the exact bytes executed), the chain of files a
thread is importing (an include of one of them is a cycle), and the catalog
of project and global definitions with shadowing. Imports ``protocol.definitions.graph``,
``protocol.definitions.validation``, ``protocol.settings`` (types only), ``protocol.limits`` and
``protocol.errors``; must not import ``worker`` or ``supervisor``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import os
import re
import signal
import sys
import threading
import traceback
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..errors import NotFound
from ..limits import safe_error_message
from .graph import DefinitionError, Workflow, definition_digest
from .validation import name_problems, validate_workflow

if TYPE_CHECKING:  # settings pull in pydantic; a worker does not need it
    from ..settingspec import SettingsLike

SUFFIX = ".workflow.py"
# How long importing one workflow file may take (a file that loops or waits at
# import must not hang `run`, `workflows` or a worker); PI_WORKFLOWS_LOAD_TIMEOUT_S.
LOAD_TIMEOUT_S = 10.0
MAX_LOAD_TIMEOUT_S = 3600.0


def load_timeout() -> float:
    """The import time bound: the environment (shared by CLI and workers), else 10 s."""
    try:
        value = float(os.environ.get("PI_WORKFLOWS_LOAD_TIMEOUT_S", LOAD_TIMEOUT_S))
    except ValueError:
        return LOAD_TIMEOUT_S
    # NaN, inf and huge values would break the interval timer: the default instead.
    return value if 0 < value <= MAX_LOAD_TIMEOUT_S else LOAD_TIMEOUT_S
PROJECT_SUBDIR = Path(".pi") / "workflows"
Scope = Literal["project", "global"]
_counter = itertools.count(1)
# The real paths of the workflow files being imported in this thread, outermost
# first: an include of one of them is a cycle (protocol.definitions.resolve).
_loading = threading.local()


def loading() -> list[str]:
    """The chain of workflow files this thread is importing right now."""
    return list(getattr(_loading, "chain", []))


class WorkflowLoadError(DefinitionError):
    """A workflow file could not be loaded: ``path``, a one-line ``reason``,
    every definition problem in ``problems`` and, for ``--debug``, the
    traceback text in ``debug_traceback``."""

    def __init__(
        self, path: str, reason: str, problems: list[str] | None = None,
        debug_traceback: str | None = None,
    ) -> None:
        self.path = path
        self.reason = reason
        self.debug_traceback = debug_traceback
        super().__init__(problems or [reason])
        self.args = (f"{path}: {reason}",)


@dataclass(frozen=True)
class SourceIdentity:
    """Which file a definition came from: its real path and the sha256 of its bytes."""

    path: str
    sha256: str


@dataclass(frozen=True)
class LoadedWorkflow:
    workflow: Workflow
    source: SourceIdentity
    digest: str

    @property
    def name(self) -> str:
        return self.workflow.name or ""


def workflow_name_for(path: Path) -> str:
    """The workflow name a file gives: its name without ``.workflow.py`` (or ``.py``)."""
    base = path.name
    for suffix in (SUFFIX, ".py"):
        if base.endswith(suffix) and len(base) > len(suffix):
            return base[: -len(suffix)]
    return base


def source_identity(path: Path | str) -> SourceIdentity:
    """Real path and sha256 (hex) of the file's current bytes."""
    real = os.path.realpath(path)
    with open(real, "rb") as handle:
        data = handle.read()
    return SourceIdentity(real, hashlib.sha256(data).hexdigest())


def _line_in(tb: types.TracebackType | None, filename: str) -> int | None:
    line = None
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename == filename:
            line = lineno
    return line


def _module_name(stem: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_]", "_", stem)[:40]
    return f"_pi_workflow_{slug}_{os.getpid()}_{next(_counter)}"


class _ImportTimeout(BaseException):
    """Raised into a workflow file's import that ran past its time."""


@contextlib.contextmanager
def _time_bound(seconds: float) -> Iterator[None]:
    """Interrupt the block after ``seconds`` (main thread only: signals need it)."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(_signum: int, _frame: object) -> None:
        raise _ImportTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _execute(shown: str, real: str, data: bytes, timeout_s: float) -> types.ModuleType:
    name = _module_name(workflow_name_for(Path(real)))
    module = types.ModuleType(name)
    module.__file__ = real
    sys.modules[name] = module  # dataclasses and typing look the module up while it runs
    try:
        code = compile(data, real, "exec", dont_inherit=True)
        # A print() at import must not reach our stdout (it would break --json).
        with contextlib.redirect_stdout(sys.stderr), _time_bound(timeout_s):
            exec(code, module.__dict__)
    except _ImportTimeout:
        if timeout_s <= 0:  # not this file's bound: an including file's, which reports it
            raise
        raise WorkflowLoadError(
            shown, f"importing it took longer than {timeout_s:g} s (does it wait or loop at"
                   " import time?)") from None
    except SyntaxError as exc:
        raise WorkflowLoadError(
            shown, f"syntax error at line {exc.lineno}: {exc.msg}",
            debug_traceback=traceback.format_exc()) from None
    except DefinitionError as exc:
        line = _line_in(exc.__traceback__, real)
        where = f" (line {line})" if line else ""
        count = len(exc.problems)
        reason = f"invalid workflow definition{where}: " + (
            exc.problems[0] if count == 1 else f"{count} problems: " + "; ".join(exc.problems))
        raise WorkflowLoadError(shown, safe_error_message(reason), exc.problems,
                                traceback.format_exc()) from None
    except (Exception, SystemExit) as exc:
        line = _line_in(exc.__traceback__, real)
        where = f" at line {line}" if line else ""
        reason = safe_error_message(f"import failed{where}: {type(exc).__name__}: {exc}")
        raise WorkflowLoadError(shown, reason, debug_traceback=traceback.format_exc()) from None
    finally:
        sys.modules.pop(name, None)
    return module


def _the_workflow(shown: str, module: types.ModuleType) -> Workflow:
    found: dict[int, tuple[str, Workflow]] = {}
    for attr, value in vars(module).items():
        if isinstance(value, Workflow) and id(value) not in found:
            found[id(value)] = (attr, value)
    if not found:
        raise WorkflowLoadError(
            shown, "the file defines no workflow; assign `workflow = define_workflow(...)`"
            " at module level")
    if len(found) > 1:
        names = ", ".join(attr for attr, _ in found.values())
        # Often a child to include, defined beside its parent: say where it goes instead.
        hint = "" if not any(wf.exits for _, wf in found.values()) else (
            "; build a workflow you include inside a function (def child():"
            " return define_workflow(...)), or put it in a file of its own and"
            " include that file")
        raise WorkflowLoadError(
            shown, f"the file defines {len(found)} workflows ({names}); a workflow file"
            f" defines exactly one{hint}")
    return next(iter(found.values()))[1]


def load_workflow_file(path: Path | str, *, timeout_s: float | None = None) -> LoadedWorkflow:
    """Import one workflow file (within ``timeout_s``) and return its validated definition."""
    shown = str(path)
    real = os.path.realpath(path)
    try:
        with open(real, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise WorkflowLoadError(shown, "file not found") from None
    except OSError as exc:
        raise WorkflowLoadError(shown, f"cannot read the file: {exc.strerror or exc}") from None
    return _load_bytes(shown, real, data, timeout_s)


def _load_bytes(shown: str, real: str, data: bytes, timeout_s: float | None) -> LoadedWorkflow:
    stem = workflow_name_for(Path(shown))
    chain = _loading.__dict__.setdefault("chain", [])
    chain.append(real)
    try:
        module = _execute(shown, real, data, load_timeout() if timeout_s is None else timeout_s)
    finally:
        chain.pop()
    workflow = _the_workflow(shown, module)
    if workflow.name is None:
        problems = name_problems(stem)
        if problems:
            raise WorkflowLoadError(shown, f"the file name gives the workflow name: {problems[0]}",
                                    problems)
        workflow = dataclasses.replace(workflow, name=stem)
    elif workflow.name != stem:
        raise WorkflowLoadError(
            shown, f"workflow name {workflow.name!r} does not match the file name {stem!r};"
            f" rename the file to {workflow.name}{SUFFIX} or drop name=")
    try:
        validate_workflow(workflow)
    except DefinitionError as exc:
        raise WorkflowLoadError(shown, exc.message, exc.problems) from None
    source = SourceIdentity(real, hashlib.sha256(data).hexdigest())
    return LoadedWorkflow(workflow, source, definition_digest(workflow))


_WARM_UP_SOURCE = b"""
from pi_workflows import compute, define_workflow, edge

workflow = define_workflow(
    start_at="a", nodes=[compute("a", lambda ctx: {}), compute("b", lambda ctx: {})],
    edges=[edge("a", "b")])
"""


def warm_up() -> None:
    """Load a built-in definition through the path a workflow file takes.

    For a process that forks workers (the zygote): the patterns, imports and
    caches a first load fills are then paid once, not in every worker.
    Touches no file.
    """
    _load_bytes("warm-up.workflow.py", "<pi-workflows warm-up>", _WARM_UP_SOURCE, 0)


# --- discovery ----------------------------------------------------------------


@dataclass(frozen=True)
class CatalogEntry:
    """One ``*.workflow.py`` file found by discovery: loaded, or an error."""

    name: str
    path: str
    scope: Scope
    shadowed: bool
    loaded: LoadedWorkflow | None = None
    error: WorkflowLoadError | None = None

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "path": self.path, "scope": self.scope,
                                "shadowed": self.shadowed}
        if self.loaded is not None:
            data.update(digest=self.loaded.digest, sourceSha256=self.loaded.source.sha256,
                        description=self.loaded.workflow.description)
        elif self.error is not None:
            data.update(error=self.error.reason, problems=list(self.error.problems))
        return data


@dataclass(frozen=True)
class Catalog:
    """Every definition visible from a project; a project file shadows a global one."""

    project_dir: str
    global_dir: str
    entries: tuple[CatalogEntry, ...]
    known: tuple[str, ...] = ()  # names of files that were not loaded (``resolve_for``)

    def active(self) -> list[CatalogEntry]:
        """The entries that ``get`` answers from (not shadowed), by name."""
        return [e for e in self.entries if not e.shadowed]

    def names(self) -> list[str]:
        return sorted({e.name for e in self.entries} | set(self.known))

    def get(self, name: str) -> LoadedWorkflow:
        """The definition called ``name``; NotFound, or the file's load error."""
        for entry in self.active():
            if entry.name == name:
                if entry.loaded is not None:
                    return entry.loaded
                assert entry.error is not None
                raise entry.error
        known = ", ".join(self.names()) or "none"
        raise NotFound(f"no workflow named {name!r} (known: {known}); see `pi-workflows"
                       " workflows`", code="workflow_not_found")

    def as_json(self) -> dict[str, Any]:
        ok = [e.as_json() for e in self.entries if e.loaded is not None]
        bad = [e.as_json() for e in self.entries if e.loaded is None]
        return {"projectDir": self.project_dir, "globalDir": self.global_dir,
                "workflows": ok, "errors": bad}


def _scan(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.glob("*" + SUFFIX) if p.is_file())
    except OSError:
        return []


def _entry(path: Path, scope: Scope, shadowed: bool) -> CatalogEntry:
    name = workflow_name_for(path)
    try:
        return CatalogEntry(name, str(path), scope, shadowed, loaded=load_workflow_file(path))
    except WorkflowLoadError as exc:
        return CatalogEntry(name, str(path), scope, shadowed, error=exc)


def discover(
    project_dir: Path | str, global_dir: Path | str | None = None, *,
    project_workflows_dir: Path | str | None = None,
) -> Catalog:
    """Load ``<project>/.pi/workflows/*.workflow.py`` then ``<global_dir>/*.workflow.py``.

    ``project_workflows_dir`` replaces ``<project>/.pi/workflows`` (relative
    paths are taken from the project); ``global_dir`` defaults to
    ``~/.pi/agent/workflows``. A file that fails to load becomes an error
    entry; it never hides the other files.
    """
    project = Path(project_dir).expanduser().absolute()
    local = Path(project_workflows_dir).expanduser() if project_workflows_dir else PROJECT_SUBDIR
    local = local if local.is_absolute() else project / local
    shared = Path(global_dir or "~/.pi/agent/workflows").expanduser().absolute()
    entries = [_entry(f.path, f.scope, f.shadowed) for f in catalog_files(local, shared)]
    return Catalog(str(local), str(shared), tuple(entries))


@dataclass(frozen=True)
class CatalogFile:
    """A ``*.workflow.py`` file discovery would load, before it is imported."""

    name: str
    path: Path
    scope: Scope
    shadowed: bool


def catalog_files(local: Path, shared: Path) -> list[CatalogFile]:
    """The files of both directories, by name, a project file before a global one."""
    files: list[CatalogFile] = []
    seen: set[str] = set()
    for path in _scan(local):
        files.append(CatalogFile(workflow_name_for(path), path, "project", False))
        seen.add(workflow_name_for(path))
    if os.path.realpath(shared) != os.path.realpath(local):
        for path in _scan(shared):
            name = workflow_name_for(path)
            files.append(CatalogFile(name, path, "global", name in seen))
    files.sort(key=lambda f: (f.name, f.scope != "project"))
    return files


def workflow_dirs(settings: SettingsLike, project_dir: Path | str) -> tuple[Path, Path]:
    """The project and global workflow directories the settings name."""
    project = Path(project_dir).expanduser().absolute()
    local = settings.project_workflows_dir or PROJECT_SUBDIR
    local = local.expanduser()
    local = local if local.is_absolute() else project / local
    shared = (settings.global_workflows_dir or settings.home).expanduser().absolute()
    return local, shared


def workflow_file_for(settings: SettingsLike, project_dir: Path | str, text: str) -> Path | None:
    """What a command's FILE-or-NAME argument names: a path as given (an existing file,
    or anything that looks like a path), else a workflow name's file in the project's,
    then the global, directory; None when it is neither."""
    given = Path(text).expanduser()
    if given.exists() or "/" in text or text.endswith(".py"):
        return given
    for directory in workflow_dirs(settings, project_dir):
        candidate = directory / f"{text}{SUFFIX}"
        if candidate.is_file():
            return candidate
    return None


def discover_for(settings: SettingsLike, project_dir: Path | str) -> Catalog:
    """``discover`` with the directories from settings."""
    local, shared = workflow_dirs(settings, project_dir)
    return discover(project_dir, shared, project_workflows_dir=local)


def resolve_for(settings: SettingsLike, project_dir: Path | str, name: str) -> Catalog:
    """A catalog that answers ``get(name)`` having imported only that one file.

    The project file wins over the global one, as in ``discover``; the other
    files are listed by name for the not-found message, never imported.
    """
    local, shared = workflow_dirs(settings, project_dir)
    entries: list[CatalogEntry] = []
    names: set[str] = set()
    for scope, directory in (("project", local), ("global", shared)):
        for path in _scan(directory):
            stem = workflow_name_for(path)
            names.add(stem)
            if stem == name and not entries:
                entries.append(_entry(path, scope, False))  # type: ignore[arg-type]
    return Catalog(str(local), str(shared), tuple(entries), known=tuple(sorted(names)))
