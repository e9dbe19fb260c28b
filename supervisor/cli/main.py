"""The ``pi-workflows`` entry point, with a fast path for the read-only JSON commands.

Owns ``main``: ``status [RUN] --json``, ``list --json``, ``sync --json``,
``run NAME --detach --json``, ``start NAME --json``, ``resolve-follow-up
INTENT --json``, ``answer RUN --json`` and ``cancel RUN --json`` (what the
Pi extension and scripts call, often once a turn), the extension's session
runner ``activate --session S --park-on-eof`` (its start-up is on the way
from the model's turn to the run's first node), and a foreground ``host
[--project P] [--concurrency N] [-- PI_ARGS]`` (a host restarted after a
crash should reach its runs fast), are parsed here by hand, each by the
``FastSpec`` of its entry in the command table (``protocol.commands``), and
run without typer or pydantic, whose imports alone cost ten times a bare
interpreter start. Everything else, and anything unusual in
those commands (``--help``, an unknown or repeated option, ``--opt=value``,
a value that looks like an option, ``--follow``, odd settings that
``protocol.leansettings`` declines, shell completion), goes to the full
typer app (``supervisor.cli.app``), which also gives every parse error. The
answers come from the same functions (``supervisor.views.reports``,
``supervisor.session.sync``, ``supervisor.session.actions``,
``supervisor.session.activation``), and the
one-line errors and exit codes are those of ``supervisor.cli.app.main``:
``e2e/test_fastcli.py`` runs each case both ways and compares
the bytes. ``PI_WORKFLOWS_NO_FAST_CLI=1``
forces the typer path. Imports ``protocol`` and the modules the fast
commands use; typer and pydantic only when it falls back.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...protocol.commands import BY_NAME
from ...protocol.record import record
from .exits import exit_for, session_required

if TYPE_CHECKING:
    from ...protocol.paths import Paths
    from ...protocol.settingspec import SettingsLike

NO_FAST_ENV = "PI_WORKFLOWS_NO_FAST_CLI"
SESSION_ENV = "PI_WORKFLOWS_SESSION"


class _Declined(Exception):
    """Not a case the fast path takes: the typer app handles it."""


@record
class _Call:
    """A command line the fast path took apart, by its command's ``FastSpec``."""

    command: str
    positional: list[str]
    seen: set[str]  # the flags given
    values: dict[str, str]  # the options given, with their values
    passed: list[str]  # the words after ``--`` (``host -- PI_ARGS``)


def _parse(args: list[str]) -> _Call:
    entry = BY_NAME.get(args[0]) if args else None
    spec = None if entry is None else entry.fast
    if entry is None or spec is None:
        raise _Declined
    rest = args[1:]
    positional: list[str] = []
    seen: set[str] = set()
    values: dict[str, str] = {}
    passed: list[str] = []
    i = 0
    while i < len(rest):
        token = rest[i]
        if token == "--" and spec.passthrough:
            passed = rest[i + 1:]
            break
        if token in spec.flags and token not in seen:
            seen.add(token)
        elif token in spec.valued and token not in values and i + 1 < len(rest):
            value = rest[i + 1]
            if not value or value.startswith("-"):
                raise _Declined
            values[token] = value
            i += 1
        elif token.startswith("-") or len(positional) >= spec.most:
            raise _Declined  # -h, --help, --, unknown, repeated, --opt=value, one too many
        else:
            positional.append(token)
        i += 1
    given = seen | set(values)
    if len(positional) < spec.least or not spec.required <= given:
        raise _Declined  # a missing argument is worded by click; a run here is watched live
    return _Call(entry.name, positional, seen, values, passed)


def _settings_and_paths(values: dict[str, str]) -> tuple[SettingsLike, Paths]:
    """``cli.options.project_context`` without typer."""
    from ...protocol.leansettings import current_settings
    from ...protocol.paths import resolve_paths

    settings = current_settings()
    return settings, resolve_paths(settings, Path(values.get("--project", ".")))


def _session(values: dict[str, str]) -> str | None:
    """``--session``, else the environment (an empty variable counts as unset, as in click)."""
    from ...protocol.limits import validate_session_id

    value = values.get("--session") or os.environ.get(SESSION_ENV) or None
    return None if value is None else validate_session_id(value)


def _own_session(values: dict[str, str], command: str) -> str:
    """The session a command acts for, which it cannot do without."""
    owner = _session(values)
    if owner is None:
        raise session_required(command)
    return owner


def _emit(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True) + "\n")
    sys.stdout.flush()


def _status(call: _Call) -> int:
    from ...protocol.limits import validate_run_id
    from ..views.reports import status_data

    positional = call.positional
    run = validate_run_id(positional[0]) if positional else None  # checked as it is parsed
    settings, paths = _settings_and_paths(call.values)
    owner = _session(call.values)
    _emit(status_data(settings, paths, run, owner, nodes="--nodes" in call.seen))
    return 0


def _bounded(text: str | None, least: int, most: int) -> int | None:
    """An integer option the fast path takes as typed; anything else click words."""
    if text is None:
        return None
    # The length test comes first: int() refuses a string over 4,300 digits.
    if not (text.isascii() and text.isdigit()) or (text[0] == "0" and text != "0") \
            or len(text) > len(str(most)) or not least <= int(text) <= most:
        raise _Declined
    return int(text)


def _list(call: _Call) -> int:
    from ..views.listing import MAX_LIMIT, MAX_OFFSET
    from ..views.reports import list_data

    values = call.values
    limit = _bounded(values.get("--limit"), 1, MAX_LIMIT)
    offset = _bounded(values.get("--offset"), 0, MAX_OFFSET) or 0
    settings, paths = _settings_and_paths(values)
    _emit({"runs": list_data(settings, paths, state=values.get("--state"),
                             workflow=values.get("--workflow"), since=values.get("--since"),
                             until=values.get("--until"), limit=limit, offset=offset)})
    return 0


def _sync(call: _Call) -> int:
    from ...protocol.store import open_store
    from ..session import sync as catchup

    settings, paths = _settings_and_paths(call.values)
    owner = _own_session(call.values, "sync")
    with open_store(settings, paths.store_file) as store:
        try:
            snapshot = catchup.take(store, paths.runs_dir, owner,
                                    hold_follow_ups="--hold-follow-ups" in call.seen)
            _emit(snapshot.as_json())
            catchup.delivered(store, snapshot)
        except KeyboardInterrupt:
            return 0  # what was shown is confirmed; the rest comes next time
    return 0


def _run(call: _Call) -> int:
    from ..session import actions
    from ..session.runinput import parse_input

    positional, values = call.positional, call.values
    settings, paths = _settings_and_paths(values)
    owner = _session(values)
    raw = parse_input(positional[1:], values.get("--input-json"), values.get("--input-file"))
    prepared = actions.prepare(settings, paths, positional[0], raw)
    _emit(actions.detach_json(actions.detach(settings, paths, prepared, owner)))
    return 0


def _start(call: _Call) -> int:
    from ..session import actions
    from ..session.runinput import parse_input

    positional, values = call.positional, call.values
    settings, paths = _settings_and_paths(values)
    owner = _own_session(values, "start")
    raw = parse_input(positional[1:], values.get("--input-json"), values.get("--input-file"))
    prepared = actions.prepare(settings, paths, positional[0], raw)
    _emit(actions.start_json(actions.start(settings, paths, prepared, owner,
                                           by_agent="--by-agent" in call.seen)))
    return 0


def _answer(call: _Call) -> int:
    from ...protocol.limits import validate_run_id
    from ..session import actions

    positional, values = call.positional, call.values
    run = validate_run_id(positional[0])  # checked as it is parsed
    settings, paths = _settings_and_paths(values)
    owner = _session(values)
    value = actions.answer_value(positional[1:], values.get("--input-json"),
                                 values.get("--input-file"))
    parent, row, given = actions.answer(settings, paths, run, value,
                                        force="--force" in call.seen, owner=owner)
    _emit(actions.answer_json(parent, row, given))
    return 0


def _cancel(call: _Call) -> int:
    from ...protocol.limits import validate_run_id
    from ..session import actions

    run = validate_run_id(call.positional[0])
    settings, paths = _settings_and_paths(call.values)
    by = _own_session(call.values, "cancel --by-agent") if "--by-agent" in call.seen else None
    result, _ = actions.cancel_run(settings, paths, run, no_wait="--no-wait" in call.seen,
                                   by_session=by)
    _emit(actions.cancel_json(result))
    return 0


def _concurrency(values: dict[str, str], least: int, most: int) -> int | None:
    text = values.get("--concurrency")
    if text is None:
        return None
    if not text.isdigit() or not least <= int(text) <= most:
        raise _Declined  # click words the error
    return int(text)


def _host(call: _Call) -> int:
    """A host in the foreground; ``--background``, ``--stop`` and ``--help`` are typer's."""
    from ..host.foreground import MAX_CONCURRENCY, MIN_CONCURRENCY, run_foreground

    concurrency = _concurrency(call.values, MIN_CONCURRENCY, MAX_CONCURRENCY)
    settings, paths = _settings_and_paths(call.values)
    return run_foreground(settings, paths, concurrency, call.passed)


# click's ANSI codes, which ``typer.echo`` drops when standard output is no terminal
# (a pattern, not compiled here: ``re`` caches it, and only ``activate`` uses it).
_ANSI = r"\033\[[;?0-9]*[a-zA-Z]"


def _echo(line: str) -> None:
    """``typer.echo`` of one line of text, without typer: the same bytes, flushed."""
    out = sys.stdout
    if out is None:
        return
    text = line + "\n"
    try:
        terminal = out.isatty()
    except Exception:  # as click: a stream that cannot tell is no terminal
        terminal = False
    out.write(text if terminal else re.sub(_ANSI, "", text))
    out.flush()


def _activate(call: _Call) -> int:
    """``activate --session S --park-on-eof``: the Pi extension's session runner.

    What ``cli.commands.start_activate.activate_command`` does for that form
    (no ``--json``): the run shown live on a terminal, else as plain lines.
    """
    from ...protocol.store import open_store
    from ..session.activation import activate
    from ..session.lifeline import stdin_lifeline
    from ..views.runview import terminal_view

    settings, paths = _settings_and_paths(call.values)
    owner = _own_session(call.values, "activate")
    with open_store(settings, paths.store_file) as store, \
            terminal_view(_echo, project=paths.project) as view:
        return activate(store, settings, paths, owner, view=view, lifeline=stdin_lifeline)


def _resolve(call: _Call) -> int:
    from ...protocol.store import open_store

    positional, values = call.positional, call.values
    settings, paths = _settings_and_paths(values)
    with open_store(settings, paths.store_file) as store:
        store.resolve_turn_intent(positional[0], values["--token"])
    _emit({"intentId": positional[0], "resolved": True})
    return 0


# The commands whose table entry has a FastSpec, and what runs each of them.
_HANDLERS: dict[str, Callable[[_Call], int]] = {
    "host": _host, "status": _status, "list": _list, "sync": _sync, "run": _run,
    "start": _start, "activate": _activate, "answer": _answer, "cancel": _cancel,
    "resolve-follow-up": _resolve,
}


def fast(args: list[str]) -> int | None:
    """The exit code of a command the fast path ran; None when it declines."""
    if os.environ.get(NO_FAST_ENV) == "1" or "_PI_WORKFLOWS_COMPLETE" in os.environ:
        return None
    debug = os.environ.get("PI_WORKFLOWS_DEBUG") == "1"
    try:
        call = _parse(args)
    except _Declined:
        return None
    handler = _HANDLERS.get(call.command)
    if handler is None:
        return None  # a spec without a handler here: typer runs the command
    try:
        return handler(call)
    except _Declined:
        return None  # declined before anything was read or written
    except (Exception, KeyboardInterrupt) as exc:
        return exit_for(exc, debug=debug)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    code = fast(args)
    if code is not None:
        return code
    from .app import main as full

    return full(args)


if __name__ == "__main__":
    sys.exit(main())
