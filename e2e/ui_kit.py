"""A real ``pi-workflows ui`` child and a headless Chromium for the dashboard's browser tests.

Owns ``UiServer`` (the child, its URL read from its one line of output,
a stop by SIGTERM that expects exit 0), ``browser()`` (Playwright driving
Debian's ``/usr/bin/chromium``, never a downloaded browser) and where
screenshots go (``PI_WORKFLOWS_ARTIFACTS``, and ``docs/images`` with
``PI_WORKFLOWS_DOC_SCREENSHOTS=1``). Imports ``e2e.harness`` and Playwright;
never pytest, a conftest or a test module.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .harness import HarnessError, LineReader, Project

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
DOC_IMAGES = Path(__file__).resolve().parents[1] / "docs" / "images"


class UiServer:
    def __init__(self, project: Project, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pi_workflows", "ui", "--port", "0", "--project",
             str(project.root), *extra], env=project.env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.out = LineReader(self.proc.stdout)  # type: ignore[arg-type]
        self.err = LineReader(self.proc.stderr)  # type: ignore[arg-type]
        line = self.out.next(30, what="the ui's URL line")
        found = re.fullmatch(r"(http://127\.0\.0\.1:(\d+))/\?token=([\w-]+)", line.strip())
        if found is None:
            raise HarnessError(f"`pi-workflows ui` printed {line!r}, not its URL")
        self.url = line.strip()
        self.base, self.port, self.token = found.group(1), int(found.group(2)), found.group(3)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise HarnessError("`pi-workflows ui` did not stop on SIGTERM") from None


@contextmanager
def ui_server(project: Project, *extra: str) -> Iterator[UiServer]:
    server = UiServer(project, *extra)
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def artifacts(default: Path) -> Path:
    where = Path(os.environ.get("PI_WORKFLOWS_ARTIFACTS") or default)
    where.mkdir(parents=True, exist_ok=True)
    return where


def screenshot(page: Any, where: Path, name: str, doc_name: str | None = None) -> Path:
    path = where / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if doc_name is not None and os.environ.get("PI_WORKFLOWS_DOC_SCREENSHOTS") == "1":
        DOC_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOC_IMAGES / doc_name)
    return path
