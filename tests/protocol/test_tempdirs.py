"""Owned temporary directories: a dead owner's go, a live owner's and unattributed ones stay."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from pi_workflows.protocol.tempdirs import OWNER_FILE, owned_tempdir, sweep_tempdirs

MAKE = ("import sys; from pi_workflows.protocol.tempdirs import owned_tempdir;"
        " print(owned_tempdir(sys.argv[1]))")


@pytest.mark.timeout(60)
def test_a_dead_owners_directory_is_swept_and_live_or_unowned_ones_are_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    # A real process made it and exited: its owner is provably dead.
    dead = Path(subprocess.run([sys.executable, "-c", MAKE, "pwb-"], env=env, check=True,
                               capture_output=True, text=True).stdout.strip())
    (dead / "bridge.sock").write_text("")
    tempfile.tempdir = None  # read TMPDIR again
    try:
        live = Path(owned_tempdir("pi-workflows-pi-"))  # this process: alive
        unowned = tmp_path / "pi-workflows-pi-x"
        unowned.mkdir()
        other = tmp_path / "keep-me"
        other.mkdir()
        (other / OWNER_FILE).write_text((dead / OWNER_FILE).read_text())
        link = tmp_path / "pwb-link"
        link.symlink_to(dead)
        assert oct(live.stat().st_mode & 0o777) == "0o700"
        assert oct((live / OWNER_FILE).stat().st_mode & 0o777) == "0o600"

        assert sweep_tempdirs() == 1
        assert not dead.exists()
        assert live.is_dir() and unowned.is_dir() and other.is_dir() and link.is_symlink()
    finally:
        tempfile.tempdir = None
