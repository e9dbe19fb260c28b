"""``export RUN``: the page is the run's, private, written where the user says (or here)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pi_workflows.protocol.bundle import Bundle
from pi_workflows.protocol.paths import resolve_paths
from pi_workflows.protocol.pibin import SESSION_FILE
from pi_workflows.protocol.settings import load_settings
from pi_workflows.protocol.store import Store

from tests.helpers.cli import run_cli
from tests.helpers.store import put_in_state

RUN = "20990101T000000Z-demo-0000abcd"
# What Pi 0.73.1 does with `--export SESSION [OUT]`: a 0644 file, named after the
# session file when OUT is left out, and "Exported to:" on stderr.
FAKE_PI = """#!/bin/sh
[ "$1" = "--export" ] || exit 9
out="${3:-pi-session-$(basename "$2" .jsonl).html}"
printf '<!doctype html><html>conversation</html>\\n' > "$out"
chmod 644 "$out" 2>/dev/null
echo "Exported to: $out" >&2
"""


def _project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    project = tmp_path / "project"
    project.mkdir()
    paths = resolve_paths(load_settings(), project)
    paths.store_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with Store(paths.store_file) as store:
        put_in_state(store, RUN, "done")
    session = Bundle(paths.runs_dir, RUN).session_dir / SESSION_FILE
    session.parent.mkdir(parents=True)
    session.write_text("{}\n")
    pi = tmp_path / "pi"
    pi.write_text(FAKE_PI)
    pi.chmod(0o755)
    return project, {**os.environ, "PI_WORKFLOWS_PI_BIN": str(pi)}


def test_export_without_html_writes_run_html_here_private_and_says_where(
        tmp_path: Path) -> None:
    project, env = _project(tmp_path)
    here = tmp_path / "here"
    here.mkdir()
    done = run_cli("export", RUN, "--project", str(project), env=env, cwd=here)
    assert done.returncode == 0, done.stderr
    page = here / f"{RUN}.html"
    assert done.stdout == f"{page}\n"
    assert stat.S_IMODE(page.stat().st_mode) == 0o600
    assert "conversation" in page.read_text()
    assert not list(project.glob("*.html"))  # nothing dropped into the project


def test_export_to_a_named_file_is_private_too(tmp_path: Path) -> None:
    project, env = _project(tmp_path)
    page = tmp_path / "out" / "page.html"
    page.parent.mkdir()
    done = run_cli("export", RUN, "--html", str(page), "--json", "--project", str(project),
                   env=env)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(page.stat().st_mode) == 0o600
    assert '"html": "' + str(page) + '"' in done.stdout
