"""The worker's end of the ``workflow`` tool: a local socket the bridge asks for verdicts.

Owns a listening UNIX socket (a file in a private temporary directory)
and a thread that answers each bridge call with one JSON line
``{"ok", "message"}`` computed by the handler the executor sets for the
step in progress. One call per connection; a handler error becomes a
refusal, never a crash. Imports ``protocol.tempdirs`` only.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import threading
from collections.abc import Callable
from typing import Any

from ..protocol.tempdirs import owned_tempdir

Handler = Callable[[dict[str, Any]], tuple[bool, str]]
MAX_REQUEST_BYTES = 4 * 1024 * 1024  # a submission is bounded by the output limits later


class BridgeServer:
    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # A socket file in a fresh 0700 directory: only this user can connect,
        # and the short path fits sun_path (Node's abstract-socket support
        # varies by version, so no abstract name).
        # Its owner file lets the host's sweep remove it after a kill -9 of this worker.
        self._dir = owned_tempdir("pwb-")
        self.address = os.path.join(self._dir, "bridge.sock")
        self.sock.bind(self.address)
        self.sock.listen(8)
        self._handler: Handler | None = None
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._serve, daemon=True, name="pi-workflows-bridge").start()

    def set_handler(self, handler: Handler | None) -> None:
        with self._lock:
            self._handler = handler

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(30)
            data = b""
            try:
                while b"\n" not in data and len(data) < MAX_REQUEST_BYTES:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                request = json.loads(data.split(b"\n", 1)[0])
                if not isinstance(request, dict):
                    raise ValueError("not an object")
                with self._lock:
                    handler = self._handler
                if handler is None:
                    ok, message = False, "no workflow step is waiting for a submission right now"
                else:
                    ok, message = handler(request)
            except (OSError, ValueError):
                ok, message = False, "the workflow call could not be read; call the tool again"
            except Exception as exc:  # a verdict that raised must not kill the bridge
                ok, message = False, f"the submission could not be checked ({type(exc).__name__})"
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"ok": ok, "message": message}).encode() + b"\n")

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        with contextlib.suppress(OSError):
            os.unlink(self.address)
        shutil.rmtree(self._dir, ignore_errors=True)
