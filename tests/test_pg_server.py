"""The PostgreSQL test server (tests/helpers/pg.py): a real 15.x server, schemas and
databases that are fresh, separate and dropped, and a stop that leaves no process."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import psutil
import pytest

from tests.helpers import pg

psycopg = pytest.importorskip("psycopg", reason=pg.SKIP_NO_PSYCOPG)


def _one(url: str, query: str) -> object:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


@pytest.mark.timeout(60)
def test_the_server_is_postgresql_15(pg_url: str) -> None:
    version = _one(pg_url, "SELECT version()")
    assert isinstance(version, str) and version.startswith("PostgreSQL 15."), version


@pytest.mark.timeout(60)
def test_each_schema_url_is_a_fresh_empty_schema_of_its_own(pg_url: str,
                                                            pg_schema_url: str) -> None:
    with pg.fresh_schema(pg_url) as other_url:
        first = _one(pg_schema_url, "SELECT current_schema()")
        second = _one(other_url, "SELECT current_schema()")
        # psycopg (libpq) honours the URL's options: search_path is the schema alone.
        assert _one(pg_schema_url, "SHOW search_path") == first
        assert isinstance(first, str) and first.startswith("t_") and len(first) == 18
        assert first != second
        for url in (pg_schema_url, other_url):
            assert _one(url, "SELECT count(*) FROM pg_class c JOIN pg_namespace n "
                             "ON n.oid = c.relnamespace WHERE n.nspname = current_schema()") == 0
        with psycopg.connect(pg_schema_url, autocommit=True) as conn:
            conn.execute("CREATE TABLE runs (id int PRIMARY KEY)")
            conn.execute("INSERT INTO runs VALUES (1)")
        assert _one(pg_schema_url, "SELECT count(*) FROM runs") == 1
        assert _one(other_url, "SELECT to_regclass('runs')") is None


@pytest.mark.timeout(60)
def test_leaving_a_fresh_schema_drops_it_and_what_it_holds(pg_url: str) -> None:
    with pg.fresh_schema(pg_url) as url:
        schema = _one(url, "SELECT current_schema()")
        assert isinstance(schema, str)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE runs (id int)")
        assert pg.schema_exists(pg_url, schema)
    assert not pg.schema_exists(pg_url, schema)


@pytest.mark.timeout(60)
def test_a_leaked_lock_makes_the_drop_give_up_with_a_warning_not_hang(pg_url: str) -> None:
    schema = pg.create_schema(pg_url)
    url = pg.schema_url(pg_url, schema)
    with psycopg.connect(url) as leaked:
        leaked.execute("CREATE TABLE runs (id int)")
        leaked.commit()
        leaked.execute("SELECT * FROM runs")  # its open transaction keeps a lock on runs
        with pytest.warns(UserWarning, match=f"test schema {schema} left behind"):
            assert not pg.drop_schema(pg_url, schema, lock_timeout="200ms")
        assert pg.schema_exists(pg_url, schema)
    assert pg.drop_schema(pg_url, schema)
    assert not pg.schema_exists(pg_url, schema)


@pytest.mark.timeout(60)
def test_the_database_url_is_a_fresh_database(pg_url: str, pg_database_url: str) -> None:
    name = _one(pg_database_url, "SELECT current_database()")
    assert isinstance(name, str) and name.startswith("t_") and name != "postgres"
    with psycopg.connect(pg_database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE runs (id int)")
    assert _one(pg_url, "SELECT to_regclass('runs')") is None


@pytest.mark.timeout(60)
def test_leaving_a_fresh_database_drops_it_despite_open_connections(pg_url: str) -> None:
    with pg.fresh_database(pg_url) as url:
        name = _one(url, "SELECT current_database()")
        leaked = psycopg.connect(url)
    try:
        assert _one(pg_url, f"SELECT count(*) FROM pg_database WHERE datname = '{name}'") == 0
    finally:
        leaked.close()


@pytest.mark.timeout(10)
def test_schema_url_adds_the_search_path_to_the_options_already_there() -> None:
    url = pg.schema_url("postgresql://u@h:5/db?sslmode=disable&options=-cwork_mem%3D4MB",
                        "t_0123456789abcdef")
    parts = urlsplit(url)
    assert (parts.netloc, parts.path) == ("u@h:5", "/db")
    assert parse_qs(parts.query) == {
        "sslmode": ["disable"],
        "options": ["-cwork_mem=4MB -csearch_path=t_0123456789abcdef"]}
    assert "options=-csearch_path%3Dt_x" in pg.schema_url("postgresql://h/db", "t_x")


@pytest.mark.timeout(10)
def test_find_pg_bin_takes_the_environment_s_directory_if_it_has_initdb(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(pg.BIN_ENV, str(tmp_path))
    assert pg.find_pg_bin() is None
    (tmp_path / "initdb").touch()
    assert pg.find_pg_bin() == tmp_path


@pytest.mark.timeout(60)
def test_a_stopped_server_leaves_no_process() -> None:
    bin_dir = pg.find_pg_bin()
    if bin_dir is None:
        pytest.skip(pg.SKIP_NO_SERVER)
    # Not under pytest's tmp_path: as root, the server user could not reach it.
    with tempfile.TemporaryDirectory(prefix="pi-workflows-pg-test-") as root:
        with pg.PgServer.start(Path(root), bin_dir) as server:
            assert (os.stat(server.data_dir).st_mode & 0o777) == 0o700
            assert (os.stat(server.sock_dir).st_mode & 0o777) == 0o700
            assert _one(server.url, "SELECT 1") == 1
            procs = server._server_processes()
            assert procs
        assert not [p for p in procs if p.is_running()
                    and p.status() != psutil.STATUS_ZOMBIE]
        server.stop()  # a second stop has nothing to do
