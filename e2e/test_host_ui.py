"""``host --ui``: a real host keeps a real ``pi-workflows ui`` child beside it.

The child's URL (with the token) lands in ``<stateDir>/ui-url``, mode 0600;
it serves 200 with the token and 403 without; killed with SIGKILL, the
host starts a new child, which serves on a URL of its own (a new token)
written over the file; SIGTERM to the host stops the child and the file is
removed.
"""

from __future__ import annotations

import http.client
import os
import signal
import stat
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest

from .harness import HostProcess, Project, wait_for

pytestmark = pytest.mark.slow

URL_FILE = "ui-url"
DEADLINE_S = 30.0


def _url(path: Path, not_this: str | None = None) -> str | None:
    """The URL in the file once it is there (and differs from ``not_this``)."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return text if text and text != not_this else None


def _get(url: str, *, token: bool = True) -> int:
    parts = urlsplit(url)
    assert parts.hostname == "127.0.0.1" and parts.port is not None
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request("GET", f"/?{parts.query}" if token else "/")
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def _ui_children(host: HostProcess) -> list[psutil.Process]:
    out = []
    for child in psutil.Process(host.pid).children():
        try:
            argv = child.cmdline()
        except psutil.Error:
            continue
        if "ui" in argv and "--url-file" in argv and child.status() != psutil.STATUS_ZOMBIE:
            out.append(child)
    return out


def _one_ui_child(host: HostProcess) -> psutil.Process:
    found = wait_for(lambda: (lambda kids: kids if len(kids) == 1 else None)(
        _ui_children(host)), DEADLINE_S, what="the host's one ui child",
        diag=lambda: host.log_text()[-3000:])
    return found[0]


@pytest.mark.timeout(120)
def test_host_ui_keeps_a_dashboard_child_and_stops_it(project: Project) -> None:
    host = project.start_host("--ui")
    url_file = project.paths.state_dir / URL_FILE
    url = wait_for(lambda: _url(url_file), DEADLINE_S, what=f"{url_file}",
                   diag=lambda: host.log_text()[-3000:])
    assert stat.S_IMODE(os.stat(url_file).st_mode) == 0o600
    assert "token=" in url
    assert url.split("token=", 1)[1] not in host.log_text()  # the log names the file only
    assert _get(url) == 200
    assert _get(url, token=False) == 403

    first = _one_ui_child(host)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    # A new child: a new port and token, written over the (now stale) file.
    again = wait_for(lambda: _url(url_file, not_this=url), DEADLINE_S,
                     what="the restarted ui child's URL", diag=lambda: host.log_text()[-3000:])
    assert again.split("token=", 1)[1] != url.split("token=", 1)[1]
    assert stat.S_IMODE(os.stat(url_file).st_mode) == 0o600
    second = _one_ui_child(host)
    assert second.pid != first.pid
    assert _get(again) == 200
    assert _get(again, token=False) == 403
    assert host.poll() is None  # the host itself never noticed more than its child

    _, code = project.stop_host(host)
    assert code == 0
    assert not second.is_running() or second.status() == psutil.STATUS_ZOMBIE
    assert not url_file.exists()
