"""Serving the dashboard: the socket on 127.0.0.1, uvicorn, the URL line, a clean stop.

Owns ``serve(settings, paths, port=, actions=, open_browser=, say=)``: it
binds 127.0.0.1 itself (port 0 picks a free one, so the URL is known before
uvicorn starts), builds the app over the project's view stream, says the
URL with its token once (``say``; the ``ui`` command prints it, a host's
child writes it to a 0600 file too), opens a browser when asked, and
returns 0 once SIGINT or SIGTERM stopped the server. Imports uvicorn and
the web modules; never ``cli``, ``host`` or another sibling.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import socket
import threading
import webbrowser
from collections.abc import Callable, Iterator
from pathlib import Path

import uvicorn

from ...protocol.errors import UsageError
from ...protocol.paths import Paths
from ...protocol.settingspec import SettingsLike
from .actions import Actions
from .app import create_app
from .security import Access
from .source import StreamSource

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Server(uvicorn.Server):
    """uvicorn's server, stopped by SIGINT or SIGTERM and then returning (exit 0): uvicorn
    itself raises the signal again once it has stopped, which would end the process by it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        saved = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in saved.items():
                signal.signal(sig, handler)


def bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        why = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror})"
        raise UsageError(f"port {port} {why}; pick another with --port (0 picks a free one)",
                         code="port_unavailable") from exc
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


def write_url_file(path: Path, url: str) -> None:
    """The URL (it holds the token) in a file only its owner reads."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # A fresh name, made here (never a file or a link someone left), then renamed.
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(url + "\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def serve(settings: SettingsLike, paths: Paths, *, port: int = 0, actions: bool = False,
          open_browser: bool = False, say: Callable[[str], None] = print,
          url_file: Path | None = None) -> int:
    sock = bind(port)
    access = Access(port=sock.getsockname()[1], actions=actions)
    app = create_app(StreamSource(settings, paths), access,
                     Actions(settings, paths) if actions else None)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                            # An open event stream must not hold a Ctrl-C up for long.
                            timeout_graceful_shutdown=2, server_header=False,
                            date_header=False)
    server = _Server(config)
    if url_file is not None:
        write_url_file(url_file, access.url())
    say(access.url())
    if open_browser:
        with contextlib.suppress(Exception):  # no browser is not an error: the URL is printed
            webbrowser.open(access.url())
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        if url_file is not None:
            with contextlib.suppress(OSError):
                url_file.unlink()
    return 0
