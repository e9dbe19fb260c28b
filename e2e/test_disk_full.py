"""A full disk: one clear line in the CLI, a paced warning in the host, and recovery.

The project's state directory (store, bundles, logs) is put on a small tmpfs
and filled to the last byte. Skipped where this process may not mount one
(it needs root or CAP_SYS_ADMIN).
"""

from __future__ import annotations

import contextlib
import errno
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import Project, clean_env, poll, wait_for
from .sessions_kit import QUICK

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]  # real processes: an e2e drill


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs",
                           str(mount)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(path: Path) -> None:
    chunk = b"\0" * 65536
    with open(path, "wb", buffering=0) as out:
        while True:
            try:
                out.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        with contextlib.suppress(OSError):  # the last bytes, one at a time
            while True:
                out.write(b"\0")


def test_a_full_disk_is_one_line_a_paced_warning_and_the_host_recovers(
        tmp_path: Path, small_disk: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    env = clean_env(small_disk / "home", PI_WORKFLOWS_FSYNC="never",
                    PI_WORKFLOWS_POLL_INTERVAL_S="0.2", PI_WORKFLOWS_BUSY_TIMEOUT_MS="100")
    project = Project(root, env)
    try:
        project.write_workflow("quick", QUICK)
        host = project.start_host()  # its own output goes to root/host.log, off the tmpfs
        first = project.detach("quick")
        wait_for(lambda: project.row(first).state == "done", what="a run before the disk fills")

        filler = small_disk / "filler"
        _fill(filler)
        refused = project.cli("run", "quick", "--detach", check=False)
        assert refused.returncode == 6, refused.stderr
        [line] = refused.stderr.strip().splitlines()
        assert line.startswith("pi-workflows: error: the disk is full: free some space")
        assert "Traceback" not in refused.stderr

        # The host meets the full disk too (its heartbeat); it says so once, not per retry.
        wait_for(lambda: "the disk is full" in host.log_text(), 30,
                 what="the host to notice the full disk")
        # A window to count lines in, not a sync: 5 s, or until the host exits.
        poll(lambda: host.poll() is not None, 5, interval=0.2)
        text = host.log_text()
        assert host.poll() is None, text
        assert text.count("the disk is full") == 1, text
        assert "Traceback" not in text and "Logging error" not in text

        filler.unlink()
        run_id = project.detach("quick")  # space is back: everything works again
        wait_for(lambda: project.row(run_id).state == "done", 30,
                 what="a run after space came back", diag=lambda: project.diagnose([run_id]))
        assert project.state(run_id)["status"] == "completed"
    finally:
        project.cleanup()
