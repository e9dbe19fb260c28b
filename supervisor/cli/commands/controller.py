"""The ``controller`` commands (apply, get, list, delete, reconcile, events) and ``controllers``.

Owns parsing their arguments and wording their results: ``controller apply
NAME KEY --spec-json J|--spec-file F`` creates or updates a resource (the
controller file is imported in a child of its own, ``cli.isolated``, for
its ``initial_status``), ``get`` shows one with its effects, child runs and
last 50 events, ``list`` one line each with its Ready condition, ``delete``
marks it for deletion, ``reconcile`` queues it now, ``events`` prints (and
with ``--follow`` follows) its events; ``controllers`` lists the controller
files found and their load errors. Bad input is one line on stderr, exit 2,
nothing written. ``register(app)`` adds them. Imports ``protocol``,
``views`` and ``cli``'s shared modules; must not import the worker or
another command module.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ....protocol.controllers.loading import controller_files_for
from ....protocol.errors import NotFound, UsageError
from ....protocol.paths import Paths
from ....protocol.settingspec import SettingsLike
from ....protocol.store import Store, open_store, store_present
from ....protocol.store.controllers import (
    MAX_DOCUMENT_BYTES,
    Deleted,
    validate_controller_name,
    validate_resource_key,
)
from ....protocol.wakeup import poke
from ....protocol.wire import controllers_halted_file
from ...session.runinput import _parse_json, require_utf8
from ...views import controllers as view
from ..isolated import controller_summary, load_summary
from ..options import JsonOpt, ProjectOpt, emit_json, project_context

FOLLOW_POLL_S = 0.5
GROUP_HELP = """Apply, show, reconcile and delete the resources controllers keep.

Every command takes --project DIR (default: the current directory) and
--json; `pi-workflows controller COMMAND --help` shows one. See
docs/controllers.md.

Example: pi-workflows controller list --controller filesync
"""

NameArg = Annotated[str, typer.Argument(metavar="NAME", show_default=False,
                                        help="The controller's name (its NAME.controller.py).")]
KeyArg = Annotated[str, typer.Argument(metavar="KEY", show_default=False,
                                       help="The resource's key, unique within its controller.")]


def _name_key(name: str, key: str) -> tuple[str, str]:
    return validate_controller_name(name), validate_resource_key(key)


def _store(settings: SettingsLike, paths: Paths, *, create: bool = False) -> Store:
    if not create and not store_present(settings, paths.store_file):
        raise NotFound(f"no resources yet for {paths.project} (no store at"
                       f" {paths.store_file})", code="no_store")
    paths.store_file.parent.mkdir(parents=True, exist_ok=True)
    return open_store(settings, paths.store_file)


def _resource(store: Store, name: str, key: str) -> Any:
    row = store.get_resource(name, key)
    if row is None:
        raise NotFound(f"no resource {key} of controller {name}; see `pi-workflows controller"
                       " list`", code="resource_not_found")
    return row


def _controller_file(settings: SettingsLike, project: Path, name: str) -> Path:
    for f in controller_files_for(settings, project):
        if f.name == name and not f.shadowed:
            return f.path
    known = ", ".join(sorted({f.name for f in controller_files_for(settings, project)})) or "none"
    raise NotFound(f"no controller named {name!r} (known: {known}); see `pi-workflows"
                   " controllers`", code="controller_not_found")


def _spec(spec_json: str | None, spec_file: str | None) -> Any:
    spec = _read_spec(spec_json, spec_file)
    if not isinstance(spec, dict):
        where = "--spec-json" if spec_json is not None else f"--spec-file {spec_file}"
        raise UsageError(f"{where} must be a JSON object ({{...}}), not"
                         f" {type(spec).__name__ if spec is not None else 'null'}",
                         code="spec_invalid")
    return spec


def _read_spec(spec_json: str | None, spec_file: str | None) -> Any:
    if (spec_json is None) == (spec_file is None):
        raise UsageError("give the spec with exactly one of --spec-json or --spec-file",
                         code="spec_missing")
    if spec_json is not None:
        return require_utf8(_parse_json(spec_json, "--spec-json"), "--spec-json")
    assert spec_file is not None
    where = f"--spec-file {spec_file}"
    try:
        with open(spec_file, "rb") as handle:
            data = handle.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{where}: cannot read it: {exc.strerror or exc}",
                         code="spec_invalid") from None
    if len(data) > MAX_DOCUMENT_BYTES:
        raise UsageError(f"{where} is larger than {MAX_DOCUMENT_BYTES} bytes",
                         code="spec_too_large")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise UsageError(f"{where} is not UTF-8 text", code="spec_invalid") from None
    return require_utf8(_parse_json(text, where), where)


def apply(
    name: NameArg, key: KeyArg,
    spec_json: Annotated[str | None, typer.Option(
        "--spec-json", metavar="JSON", help="The spec as JSON text.")] = None,
    spec_file: Annotated[str | None, typer.Option(
        "--spec-file", metavar="FILE", help="A file holding the spec as JSON.")] = None,
    project: ProjectOpt = Path("."), as_json: JsonOpt = False,
) -> None:
    """Create a resource of controller NAME, or replace its spec; the host reconciles it.

    The same spec again changes nothing. A new spec moves its generation.

    Example: pi-workflows controller apply filesync notes --spec-json '{"text": "hi"}'
    """
    name, key = _name_key(name, key)
    spec = _spec(spec_json, spec_file)
    settings, paths = project_context(project)
    path = _controller_file(settings, paths.project, name)
    summary = load_summary(str(path), summarize=lambda p, t: controller_summary(
        p, t, spec, with_status=True))
    if not summary["ok"]:
        raise UsageError(f"{path}: {summary['error']}", code="controller_invalid")
    with _store(settings, paths, create=True) as store:
        done = store.apply_spec(name, key, spec, initial_status=summary["initialStatus"])
    poke(paths.state_dir)
    res = done.resource
    what = "created" if done.created else ("updated" if done.changed else "unchanged")
    if as_json:
        emit_json({"action": what, **view.resource_json(res)})
        return
    typer.echo(f"{name}/{key}: {what} (generation {res.generation})")


def get(name: NameArg, key: KeyArg, project: ProjectOpt = Path("."),
        as_json: JsonOpt = False) -> None:
    """Show a resource: its spec, status, effects, child runs and last 50 events.

    Example: pi-workflows controller get filesync notes --json
    """
    name, key = _name_key(name, key)
    settings, paths = project_context(project)
    with _store(settings, paths) as store:
        row = _resource(store, name, key)
        effects = store.reconcile_effects(name, key)
        children = store.children_of(name, key)
        events = store.resource_events(name, key, limit=50)
        queue = store.queue_entry(name, key)
    if as_json:
        emit_json({**view.resource_json(row), "effects": [e.public() for e in effects],
                   "children": [c.public() for c in children],
                   "events": [e.public() for e in events],
                   "queue": None if queue is None else {
                       "state": queue.state, "dueAt": queue.due_at,
                       "attempts": queue.attempts, "lastError": queue.last_error}})
        return
    for line in view.get_page(row, effects, children, events):
        typer.echo(line)
    if queue is not None and queue.last_error:
        typer.echo(f"last error (attempt {queue.attempts}): {queue.last_error}")


def list_command(
    controller: Annotated[str | None, typer.Option(
        "--controller", metavar="NAME", help="Only this controller's resources.")] = None,
    project: ProjectOpt = Path("."), as_json: JsonOpt = False,
) -> None:
    """List resources, one line each with its Ready condition.

    Example: pi-workflows controller list --controller filesync
    """
    if controller is not None:
        validate_controller_name(controller)
    settings, paths = project_context(project)
    rows = []
    if store_present(settings, paths.store_file):
        with _store(settings, paths) as store:
            rows = store.list_resources(controller)
    halted = _halted(paths)
    if as_json:
        emit_json({"resources": [view.resource_json(r) for r in rows],
                   "workersHalted": halted})
        return
    if halted is not None:
        typer.echo(_halted_line(halted))
    if not rows:
        typer.echo("no resources")
    for row in rows:
        typer.echo(view.resource_line(row))


def delete(name: NameArg, key: KeyArg, project: ProjectOpt = Path("."),
           as_json: JsonOpt = False) -> None:
    """Delete a resource: marked now, gone once its controller's cleanup is done.

    Example: pi-workflows controller delete filesync notes
    """
    name, key = _name_key(name, key)
    settings, paths = project_context(project)
    with _store(settings, paths) as store:
        _resource(store, name, key)
        out = store.request_delete(name, key)
    poke(paths.state_dir)
    gone = isinstance(out, Deleted)
    if as_json:
        emit_json({"controller": name, "key": key, "deleted": gone,
                   "deletionRequested": True})
        return
    typer.echo(f"{name}/{key}: " + ("deleted" if gone else
                                    "deletion requested; its controller cleans up, then it goes"))


def reconcile(name: NameArg, key: KeyArg, project: ProjectOpt = Path("."),
              as_json: JsonOpt = False) -> None:
    """Queue a resource's reconcile now (the host's controller workers run it).

    Example: pi-workflows controller reconcile filesync notes
    """
    name, key = _name_key(name, key)
    settings, paths = project_context(project)
    with _store(settings, paths) as store:
        how = store.enqueue_reconcile(name, key)
    poke(paths.state_dir)
    if as_json:
        emit_json({"controller": name, "key": key, "queued": how})
        return
    typer.echo(f"{name}/{key}: queued ({how})")


def events(
    name: NameArg, key: KeyArg,
    follow: Annotated[bool, typer.Option(
        "--follow", help="Keep printing new events until Ctrl-C.")] = False,
    project: ProjectOpt = Path("."), as_json: JsonOpt = False,
) -> None:
    """Print a resource's last 50 events; --follow keeps printing new ones (Ctrl-C: exit 0).

    With --json, one JSON object per line. A deleted resource's events are
    shown until `gc` removes them.

    Example: pi-workflows controller events filesync notes --follow
    """
    name, key = _name_key(name, key)
    settings, paths = project_context(project)

    def show(event: Any) -> None:
        typer.echo(json.dumps(event.public(), sort_keys=True) if as_json
                   else view.event_line(event))

    with _store(settings, paths) as store:
        last = store.resource_events(name, key, limit=50)
        if not last:  # a deleted resource's events stay until gc: shown while they do
            _resource(store, name, key)
        seq = 0
        for event in last:
            show(event)
            seq = event.seq
        try:
            while follow:
                time.sleep(FOLLOW_POLL_S)  # a view's poll, not synchronisation
                for event in store.controller_events_after(seq, controller=name, key=key):
                    show(event)
                    seq = event.seq
        except KeyboardInterrupt:  # Ctrl-C ends a follow: what was shown is all there is
            return


def _halted(paths: Paths) -> dict[str, Any] | None:
    """The host's note that it stopped restarting its controller workers, if any."""
    try:
        note = json.loads(controllers_halted_file(paths.state_dir).read_text())
    except (OSError, ValueError):
        return None
    return note if isinstance(note, dict) else None


def _halted_line(note: dict[str, Any]) -> str:
    return (f"error: the host stopped restarting its controller workers: they exited"
            f" {note.get('crashes')} times while loading the controller files (last status"
            f" {note.get('lastExit')}); fix the file that fails to load"
            " (`pi-workflows controllers`) and save it: the host starts them again")


def controllers(project: ProjectOpt = Path("."), as_json: JsonOpt = False) -> None:
    """List the controller files a project has, and the ones that fail to load.

    Each file is imported in a process of its own, within the load bound.

    Example: pi-workflows controllers --json
    """
    settings, paths = project_context(project)
    ok, bad = [], []
    for f in controller_files_for(settings, paths.project):
        entry: dict[str, Any] = {"name": f.name, "path": str(f.path), "scope": f.scope,
                                 "shadowed": f.shadowed}
        summary = load_summary(str(f.path), summarize=controller_summary)
        if summary["ok"]:
            ok.append({**entry, "timeout": summary["timeout"],
                       "description": summary["description"]})
        else:
            bad.append({**entry, "error": summary["error"], "problems": summary["problems"]})
    halted = _halted(paths)
    if as_json:
        emit_json({"controllers": ok, "errors": bad, "workersHalted": halted})
        return
    if halted is not None:
        typer.echo(_halted_line(halted))
    if not ok and not bad:
        typer.echo("no controllers (NAME.controller.py files beside the workflows)")
    for e in ok:
        flag = " (shadowed)" if e["shadowed"] else ""
        typer.echo(f"{e['name']}  {e['scope']}  timeout {e['timeout']:g} s  {e['path']}{flag}")
    for e in bad:
        typer.echo(f"error: {e['name']} ({e['scope']}) {e['path']}: {e['error']}")


def register(app: typer.Typer) -> None:
    """Add the ``controller`` group and the ``controllers`` command to the CLI."""
    group = typer.Typer(help=GROUP_HELP, no_args_is_help=True,
                        context_settings={"help_option_names": ["-h", "--help"]})
    group.command("apply")(apply)
    group.command("get")(get)
    group.command("list")(list_command)
    group.command("delete")(delete)
    group.command("reconcile")(reconcile)
    group.command("events")(events)
    app.add_typer(group, name="controller")
    app.command("controllers")(controllers)
