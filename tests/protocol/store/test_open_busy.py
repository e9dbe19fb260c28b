"""Opening an existing store never needs the write lock."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pi_workflows.protocol.store import Store

LOCKER = textwrap.dedent("""
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    sys.stdin.readline()
    conn.execute("ROLLBACK")
""")


@pytest.mark.timeout(30)
def test_an_existing_store_opens_and_reads_while_another_process_writes(
        tmp_path: Path, source: object) -> None:
    path = tmp_path / "state" / "store.sqlite3"
    with Store(path) as store:
        store.enqueue_detached("r1", source, {})  # type: ignore[arg-type]
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
        with Store(path, busy_timeout_ms=100) as busy:
            row = busy.get("r1")
            assert row is not None and row.state == "queued"
    finally:
        assert locker.stdin is not None
        locker.stdin.write("\n")
        locker.stdin.close()
        locker.wait(10)
