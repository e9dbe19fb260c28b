"""The kernel's flock table names the holder of a bundle lock (a real second process)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pi_workflows.supervisor.procs.lockholders import bundle_lock_holders, flock_holders

pytestmark = [pytest.mark.timeout(30),
              pytest.mark.skipif(not Path("/proc/locks").exists(), reason="Linux /proc/locks")]

HOLDER = textwrap.dedent("""
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    sys.stdin.read()
""")


def test_the_holder_of_an_flock_is_named_and_a_free_lock_has_none(tmp_path: Path) -> None:
    lock = tmp_path / ".bundle.lock"
    lock.write_text("")
    other = tmp_path / "other.lock"
    other.write_text("")
    assert flock_holders(lock) == []
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        holders = bundle_lock_holders(tmp_path)
        assert [h.pid for h in holders] == [proc.pid]
        assert holders[0].describe() == f"pid {proc.pid} ({holders[0].name})"
        assert flock_holders(other) == []  # another file's lock is not this one's
    finally:
        proc.communicate("")
    assert flock_holders(lock) == []


def test_a_missing_file_or_an_unreadable_table_finds_nobody(tmp_path: Path) -> None:
    assert flock_holders(tmp_path / "absent") == []
    (tmp_path / "f").write_text("")
    assert flock_holders(tmp_path / "f", table=tmp_path / "no-such-table") == []
