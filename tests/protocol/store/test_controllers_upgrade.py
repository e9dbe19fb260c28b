"""The one schema upgrade: an exact ``pi-workflows.store.v1`` file becomes v2 on open.

Additive and in place: the controller tables and the new schema id in one
transaction; every run, event and row of v1 kept. Anything else is still
refused untouched with the reset instruction.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from pi_workflows.protocol.errors import StoreIncompatible
from pi_workflows.protocol.store import SCHEMA_ID, Store, check_layout
from pi_workflows.protocol.store.db import expected_layout, v1_layout
from pi_workflows.protocol.store.schema import (
    CONTROLLER_STATEMENTS,
    V1_SCHEMA_ID,
    V1_STATEMENTS,
)

from tests.helpers import ctlchildren, processes

pytestmark = pytest.mark.timeout(60)

# The v1 DDL is frozen (the text of schema.py's SCHEMA_STATEMENTS before v2): the
# upgrade recognises exactly what v1 wrote, so nobody may edit it.
V1_DDL_SHA256 = "657573894ce0800349f70d0e8efadff85733558b1049d5107b3d2e420e9c429e"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_v1_store(path: Path, *, extra: tuple[str, ...] = (),
                  schema_id: str = V1_SCHEMA_ID) -> None:
    """A store as pi-workflows v1 left it: its DDL, WAL mode, a finished run and its events."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("BEGIN IMMEDIATE")
        for statement in (*V1_STATEMENTS, *extra):
            conn.execute(statement)
        conn.execute("INSERT INTO store_meta(key, value) VALUES ('schema', ?)", (schema_id,))
        conn.execute(
            "INSERT INTO workflow_run_queue(run_id, workflow, source_path, source_sha256,"
            " definition_digest, state, created_at, updated_at, finished_at)"
            " VALUES ('old-run', 'echo', '/p/echo.workflow.py', ?, 'sha256:x', 'done', 1, 2, 2)",
            ("ab" * 32,))
        conn.execute("INSERT INTO run_events(run_id, type, at, payload) VALUES"
                     " ('old-run', 'queued', 1, '{}'), ('old-run', 'done', 2, '{}')")
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_the_v1_ddl_is_frozen() -> None:
    assert hashlib.sha256("\n".join(V1_STATEMENTS).encode()).hexdigest() == V1_DDL_SHA256


def test_a_v1_store_opens_keeps_its_runs_and_gets_the_controller_tables(
        store_path: Path) -> None:
    make_v1_store(store_path)
    before = _digest(store_path)
    assert check_layout(store_path) == V1_SCHEMA_ID  # doctor's look writes nothing
    assert _digest(store_path) == before
    with Store(store_path) as store:
        row = store.get("old-run")
        assert row is not None and row.state == "done"
        assert [e.type for e in store.events_since(0, run_id="old-run")] == ["queued", "done"]
        store.apply_spec("files", "a", {"n": 1})
        assert store.claim_reconcile(["files"], "host-1", 30_000) is not None
    assert check_layout(store_path) == SCHEMA_ID
    conn = sqlite3.connect(f"file:{store_path}?mode=ro", uri=True)
    try:
        assert conn.execute("SELECT value FROM store_meta WHERE key = 'schema'"
                            ).fetchone()[0] == SCHEMA_ID
        objects = [tuple(map(str, r)) for r in conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
            " AND sql IS NOT NULL ORDER BY type, name")]
    finally:
        conn.close()
    assert objects == expected_layout()
    assert set(v1_layout()) < set(objects)  # additive: every v1 object as it was
    # Opening again is a plain open.
    with Store(store_path) as store:
        assert store.get_resource("files", "a") is not None


def test_openers_racing_on_a_v1_store_upgrade_it_once(store_path: Path) -> None:
    make_v1_store(store_path)
    n = 4
    barrier = processes.CTX.Barrier(n)
    procs = [processes.start(ctlchildren.open_and_apply, str(store_path), f"k{i}", barrier)
             for i in range(n)]
    processes.join_all(procs, timeout_s=50)
    with Store(store_path) as store:
        assert sorted(r.key for r in store.list_resources("files")) == [f"k{i}" for i in range(n)]
        assert store.get("old-run") is not None


@pytest.mark.parametrize("kind", ["v1_id_v2_layout", "v2_id_v1_layout", "v1_extra_index",
                                  "v1_half_upgraded"])
def test_other_layouts_are_still_refused_untouched(store_path: Path, kind: str) -> None:
    if kind == "v1_id_v2_layout":
        make_v1_store(store_path, extra=CONTROLLER_STATEMENTS)
    elif kind == "v2_id_v1_layout":
        make_v1_store(store_path, schema_id=SCHEMA_ID)
    elif kind == "v1_extra_index":
        make_v1_store(store_path, extra=("CREATE INDEX extra ON runners(pid)",))
    else:
        make_v1_store(store_path, extra=CONTROLLER_STATEMENTS[:1])
    digest = _digest(store_path)
    with pytest.raises(StoreIncompatible) as info:
        Store(store_path)
    assert "move it aside" in str(info.value) and info.value.exit_code == 5
    with pytest.raises(StoreIncompatible):
        check_layout(store_path)
    assert _digest(store_path) == digest
