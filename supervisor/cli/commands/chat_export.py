"""The conversation commands: ``chat RUN`` and ``export RUN``.

Owns opening a run's Pi conversation (the session file Pi wrote in the
run's bundle) in an interactive Pi, in the project directory, so a person
continues it like any Pi session; and exporting it as HTML with Pi's own
``--export``. A conversation has one writer: ``chat`` refuses while the run
executes, and holds a parked run (``supervisor.session.chathold``) while Pi
is open, so no host resumes it meanwhile. ``register(app)`` adds the
commands. Must not import the worker or another command module.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated

import typer

from ....protocol.agentenv import resolve_agent_dir
from ....protocol.bundle import Bundle
from ....protocol.errors import NotFound, UsageError
from ....protocol.paths import Paths
from ....protocol.pibin import SESSION_FILE, PiUnavailable, find_pi
from ....protocol.settingspec import SettingsLike
from ....protocol.spawn import PIPE, Popen, spawn
from ....protocol.states import CLAIMED
from ....protocol.store import open_store, store_present
from ...session.chathold import held_for_chat
from ...views.holds import chat_hold, hold_text
from ...views.runref import resolve_run
from ...views.wording import cli
from ..options import JsonOpt, ProjectOpt, RunArg, emit_json, project_context


def _conversation(settings: SettingsLike, paths: Paths, run: str, *,
                  writing: bool) -> tuple[str, Path]:
    """(run id, its Pi session file) for what was typed as RUN."""
    if not store_present(settings, paths.store_file):
        run = resolve_run(None, run, paths)
    else:
        with open_store(settings, paths.store_file) as store:
            run = resolve_run(store, run, paths)
            row = store.get(run)
            hold = chat_hold(store, row) if row is not None and writing else None
        if hold is not None:
            raise UsageError(f"run {run} is {hold_text(hold)}: its conversation has one writer;"
                             " leave that chat first", code="run_active")
        if row is not None and writing and row.state in CLAIMED:
            raise UsageError(f"run {run} is {row.state}: its conversation has one writer while"
                             f" it runs; wait for it (`{cli(paths.project, 'watch', run)}`) or"
                             " park it",
                             code="run_active")
    session = Bundle(paths.runs_dir, run).session_dir / SESSION_FILE
    if not session.is_file():
        raise NotFound(f"run {run} has no Pi conversation (it ran no agent step yet)",
                       code="no_conversation")
    return run, session


def _pi(settings: SettingsLike) -> str:
    try:
        return find_pi(settings.pi_bin)
    except PiUnavailable as exc:
        raise UsageError(str(exc), code="pi_not_found") from None


def _env(settings: SettingsLike, agent_dir: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # The run's recorded agent dir first (the one its steps used), else this shell's.
    chosen = agent_dir or resolve_agent_dir(settings.pi_agent_dir)
    if chosen is not None:
        env["PI_CODING_AGENT_DIR"] = chosen
    return env


def _interactive(binary: str, session: Path, project: Path, env: dict[str, str],
                 holding: Callable[[Callable[[], None]], AbstractContextManager[object]]
                 ) -> int:
    """Pi on this terminal (this session and group, so it keeps the terminal), under a hold.

    PDEATHSIG: if this process dies, Pi gets SIGTERM, so no Pi writes the
    conversation once the hold lapses. Ctrl-C is Pi's key, not ours.
    """
    proc: list[Popen[bytes]] = []

    def stop_pi(*_: object) -> None:
        if proc and proc[0].poll() is None:
            proc[0].send_signal(signal.SIGTERM)

    def lost() -> None:
        with contextlib.suppress(OSError):
            sys.stderr.write("pi-workflows: chat lost its hold on the run; closing Pi\n")
        stop_pi()

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM,
                                                       signal.SIGHUP)}
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, stop_pi)
    signal.signal(signal.SIGHUP, stop_pi)
    try:
        with holding(lost):
            proc.append(spawn([binary, "--session", str(session)], cwd=project, env=env,
                              stdin=None, new_session=False, pdeathsig=signal.SIGTERM))
            return proc[0].wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def chat_command(
    run: RunArg,
    project: ProjectOpt = Path("."),
) -> None:
    """Continue RUN's agent conversation in an interactive Pi (your own Pi setup).

    Works once the run completed, failed, waits at a checkpoint or is parked;
    refused while it runs. A parked run is held while Pi is open: no host
    resumes it until you leave Pi. Pi takes over this terminal.

    Example: pi-workflows chat 20261201T083022Z-summarize-025acc92
    """
    settings, paths = project_context(project)
    run, session = _conversation(settings, paths, run, writing=True)
    binary = _pi(settings)
    if not store_present(settings, paths.store_file):  # no store: no runner could resume it
        raise typer.Exit(_interactive(binary, session, paths.project, _env(settings),
                                      lambda _lost: contextlib.nullcontext()))
    with open_store(settings, paths.store_file) as store:
        row = store.get(run)
        env = _env(settings, store.launch_agent_dir(run))
        if row is None:
            raise NotFound(f"run {run} is not in the store", code="run_not_found")

        def holding(lost: Callable[[], None]) -> AbstractContextManager[object]:
            return held_for_chat(store, row, settings.renew_ms / 1000, lost,
                                 lambda: open_store(settings, paths.store_file))

        code = _interactive(binary, session, paths.project, env, holding)
    raise typer.Exit(code)


def export_command(
    run: RunArg,
    html: Annotated[Path | None, typer.Option(
        "--html", metavar="FILE",
        help="Where to write the HTML (default: RUN.html in the current directory).")] = None,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Write RUN's agent conversation as an HTML page (Pi's own export), readable by you only.

    Prints the path it wrote. Example: pi-workflows export 025acc92 --html run.html
    """
    settings, paths = project_context(project)
    run, session = _conversation(settings, paths, run, writing=False)
    target = (html if html is not None else Path(f"{run}.html")).expanduser().absolute()
    existed = target.exists()
    _private_file(target)
    argv = [_pi(settings), "--export", str(session), str(target)]
    proc = spawn(argv, cwd=paths.project, env=_env(settings), stdout=PIPE, stderr=PIPE)
    out, err = proc.communicate(timeout=120)
    if proc.returncode != 0 or not target.is_file():
        if not existed:
            target.unlink(missing_ok=True)  # ours, and empty: leave nothing behind
        first = (err or out).decode(errors="replace").strip().splitlines()[:1]
        raise UsageError(f"pi --export failed: {first[0] if first else proc.returncode}",
                         code="export_failed")
    os.chmod(target, 0o600)  # a conversation holds prompts: never group or world readable
    if as_json:
        emit_json({"runId": run, "html": str(target)})
    else:
        typer.echo(str(target))


def _private_file(path: Path) -> None:
    """Make ``path`` exist as 0600 before Pi writes it (a rewrite keeps the mode)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}",
                         code="export_failed") from None
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def register(app: typer.Typer) -> None:
    app.command("chat")(chat_command)
    app.command("export")(export_command)
