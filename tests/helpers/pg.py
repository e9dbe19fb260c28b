"""A real PostgreSQL server for the tests: find it, start it, stop it, hand out schemas.

Owns finding Debian's server binaries (``find_pg_bin``), one throwaway
server in a private directory (``PgServer``: initdb, pg_ctl start and
stop, nothing left running), the per-test schema and database helpers
(``fresh_schema`` and ``fresh_database``, made of ``create_schema``/
``drop_schema``, ``create_database``/``drop_database`` and ``schema_url``/
``database_url``) and the three pytest fixtures ``pg_url``,
``pg_schema_url`` and ``pg_database_url`` (registered by one import line in
``tests/conftest.py`` and ``e2e/conftest.py``). It is the one exception to
``tests.helpers``' no-fixture rule: the fixtures and the server they need
stay together, and ``scripts/pg-server`` (``python -m tests.helpers.pg
start|stop DIR``, used by ``.ci/run``) starts its server with the same
code. Imports the standard library, pytest, psutil and
``tests.helpers.waiting``; psycopg only inside the helpers that talk to the
server, so the command line runs without it. Never imports
``pi_workflows``, a conftest or a test module.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psutil
import pytest

from tests.helpers.waiting import poll

if TYPE_CHECKING:
    import psycopg

BIN_ENV = "PI_WORKFLOWS_PG_BIN"
URL_ENV = "PI_WORKFLOWS_TEST_PG_URL"
# Debian's packages put one directory per major version here.
DEBIAN_PG_ROOT = Path("/usr/lib/postgresql")
# PostgreSQL refuses to run as root: as root we start it as Debian's own server user.
SERVER_USER = "postgres"
SKIP_NO_SERVER = ("PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin; "
                  f"set {BIN_ENV}): the PostgreSQL backend's tests need it")
SKIP_NO_PSYCOPG = ("psycopg is not installed (pip install 'pi-workflows[postgres]'): "
                   "the PostgreSQL backend's tests need it")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
# A test that leaked a connection holding a lock must not hang the teardown.
DROP_LOCK_TIMEOUT = "5s"
# The kernel's limit on a unix socket path (sun_path), less its terminating NUL.
_SOCKET_PATH_MAX = 107
_STATE_FILE = "pi-workflows-pg.json"
_PORT_ATTEMPTS = 5


class PgStartError(RuntimeError):
    """The server did not start; the message ends with the tail of its log."""


def find_pg_bin() -> Path | None:
    """The server binaries' directory: ``$PI_WORKFLOWS_PG_BIN`` if set, else the
    newest ``/usr/lib/postgresql/*/bin`` with an ``initdb``; None when there is none."""
    override = os.environ.get(BIN_ENV)
    if override:
        path = Path(override)
        return path if (path / "initdb").is_file() else None
    found: list[tuple[int, Path]] = []
    with contextlib.suppress(OSError):
        for version_dir in DEBIAN_PG_ROOT.iterdir():
            if version_dir.name.isdigit() and (version_dir / "bin" / "initdb").is_file():
                found.append((int(version_dir.name), version_dir / "bin"))
    return max(found)[1] if found else None


def _free_port() -> int:
    # The port can be taken between here and the server's bind: start() retries then.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _alive(procs: Sequence[psutil.Process]) -> list[psutil.Process]:
    """Those of ``procs`` still running (a zombie has ended: only its reaping is left)."""
    running = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                running.append(proc)
    return running


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(no log at {path}: {exc.strerror})"
    return "\n".join(text.splitlines()[-lines:])


def _reachable_by(path: Path, user: pwd.struct_passwd) -> bool:
    """Whether ``user`` may traverse every directory above ``path`` (root's private
    temp dirs, pytest's among them, are not: the server could not reach its data)."""
    groups = set(os.getgrouplist(user.pw_name, user.pw_gid))
    for parent in path.parents:
        st = parent.stat()
        if st.st_uid == user.pw_uid:
            ok = bool(st.st_mode & stat.S_IXUSR)
        elif st.st_gid in groups:
            ok = bool(st.st_mode & stat.S_IXGRP)
        else:
            ok = bool(st.st_mode & stat.S_IXOTH)
        if not ok:
            return False
    return True


class PgServer:
    """One PostgreSQL server whose whole state is one private directory ``root``:
    ``data/`` (the cluster), ``sock/`` (its unix socket), ``server.log``."""

    def __init__(self, root: Path, bin_dir: Path, user: str | None, port: int) -> None:
        self.root = root
        self.bin_dir = bin_dir
        self.user = user
        self.port = port
        self.data_dir = root / "data"
        self.sock_dir = root / "sock"
        self.log_path = root / "server.log"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    # -- starting --------------------------------------------------------------

    @classmethod
    def start(cls, root: Path, bin_dir: Path | None = None,
              timeout: float = START_TIMEOUT_S) -> PgServer:
        """initdb a new cluster under ``root`` (created if missing; it must hold no
        cluster yet) and start it on a free port of 127.0.0.1, waiting until it
        accepts connections. Raises ``PgStartError`` with the log's tail."""
        bin_dir = bin_dir if bin_dir is not None else find_pg_bin()
        if bin_dir is None:
            raise PgStartError(SKIP_NO_SERVER)
        root = root.absolute()
        server = cls(root, bin_dir, SERVER_USER if os.geteuid() == 0 else None, 0)
        server._prepare_dirs()
        server._initdb()
        server._write_state()
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            server.port = _free_port()
            server._write_state()
            if server._try_start(timeout, last=attempt == _PORT_ATTEMPTS):
                return server
        raise AssertionError("unreachable: the last attempt raises")

    def _prepare_dirs(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            raise PgStartError(f"{self.data_dir} already holds a cluster: "
                               "start a server in a new directory")
        sock_path = self.sock_dir / ".s.PGSQL.65535"
        if len(str(sock_path)) > _SOCKET_PATH_MAX:
            raise PgStartError(f"{self.root} is too deep for a unix socket path "
                               f"({len(str(sock_path))} > {_SOCKET_PATH_MAX} characters)")
        owner = None
        if self.user is not None:
            try:
                owner = pwd.getpwnam(self.user)
            except KeyError:
                raise PgStartError(f"running as root, but there is no {self.user!r} user "
                                   "to run PostgreSQL as (install Debian's postgresql "
                                   "package)") from None
            if not _reachable_by(self.root, owner):
                raise PgStartError(f"the {self.user!r} user cannot reach {self.root}: "
                                   "a directory above it is private to root")
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.sock_dir.mkdir(mode=0o700, exist_ok=True)
        for path in (self.root, self.sock_dir):
            path.chmod(0o700)
        if owner is not None:
            for path in (self.root, self.sock_dir):
                os.chown(path, owner.pw_uid, owner.pw_gid)

    def _command(self, tool: str, *args: str) -> list[str]:
        cmd = [str(self.bin_dir / tool), *args]
        return ["runuser", "-u", self.user, "--", *cmd] if self.user is not None else cmd

    def _run(self, tool: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        # cwd: the server user may not be allowed into the caller's directory.
        return subprocess.run(self._command(tool, *args), cwd=self.root, env=env,
                              capture_output=True, text=True, timeout=timeout, check=False)

    def _initdb(self) -> None:
        # --no-sync: a test cluster is thrown away, a crash mid-initdb costs nothing.
        done = self._run("initdb", "-D", str(self.data_dir), "-A", "trust", "-U", "postgres",
                         "-E", "UTF8", "--locale=C", "--no-sync", timeout=START_TIMEOUT_S)
        if done.returncode != 0:
            raise PgStartError(f"initdb failed (exit {done.returncode}) in {self.data_dir}:\n"
                               f"{(done.stdout + done.stderr).strip()}")
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": "'" + str(self.sock_dir).replace("'", "''") + "'",
            # Parallel tests each hold a few connections: well above the default 100.
            "max_connections": "200",
            # The tests test the store, not PostgreSQL's own durability: a crashed test
            # server is thrown away, so skipping the flushes only saves time.
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
        }
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write("\n# pi-workflows test server (tests/helpers/pg.py)\n")
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())

    def _write_state(self) -> None:
        """What ``stop`` needs when another process (``scripts/pg-server stop``) asks."""
        state = {"bin_dir": str(self.bin_dir), "user": self.user, "port": self.port}
        path = self.root / _STATE_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(state, out)

    def _try_start(self, timeout: float, last: bool) -> bool:
        log_size = self.log_path.stat().st_size if self.log_path.exists() else 0
        try:
            done = self._run("pg_ctl", "start", "-D", str(self.data_dir), "-l",
                             str(self.log_path), "-w", "-t", str(int(timeout)),
                             "-o", f"-p {self.port}", timeout=timeout + 10)
            output, code = (done.stdout + done.stderr).strip(), done.returncode
        except subprocess.TimeoutExpired:
            output, code = "pg_ctl did not return", -1
        if code == 0:
            return True
        # pg_ctl gives up waiting but leaves a slow postmaster running: end it.
        self._stop_processes(self._server_processes())
        log = self.log_path.read_text(errors="replace")[log_size:] if self.log_path.exists() \
            else ""
        if not last and re.search(r"could not bind|Address already in use", log):
            return False
        raise PgStartError(f"PostgreSQL did not start in {self.data_dir} (pg_ctl exit {code}): "
                           f"{output}\n--- tail of {self.log_path} ---\n{_tail(self.log_path)}")

    # -- stopping --------------------------------------------------------------

    @classmethod
    def attach(cls, root: Path) -> PgServer:
        """The server ``start`` made under ``root``, from the state it left there."""
        root = root.absolute()
        state = json.loads((root / _STATE_FILE).read_text())
        return cls(root, Path(state["bin_dir"]), state["user"], int(state["port"]))

    def _server_processes(self) -> list[psutil.Process]:
        """The postmaster of this data dir (from its pid file) and all its children."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
            postmaster = psutil.Process(pid)
            # A stale pid file may name a pid reused by someone else's process.
            if str(self.data_dir) not in postmaster.cmdline():
                return []
            return [postmaster, *postmaster.children(recursive=True)]
        except (OSError, ValueError, psutil.Error):
            return []

    def _stop_processes(self, procs: Sequence[psutil.Process]) -> None:
        """Wait for ``procs`` to end (a clean shutdown ends them all), then SIGKILL
        whatever is left and wait again."""
        if not poll(lambda: not _alive(procs), STOP_TIMEOUT_S, interval=0.02):
            for proc in _alive(procs):
                with contextlib.suppress(psutil.Error):
                    proc.kill()
            if not poll(lambda: not _alive(procs), 10.0, interval=0.02):
                raise RuntimeError(f"PostgreSQL processes survived SIGKILL: {_alive(procs)}")

    def stop(self) -> None:
        """pg_ctl stop -m fast, then make sure no process of this server is left
        (killing what fast shutdown left). Harmless when it is not running."""
        procs = self._server_processes()
        if not procs:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._run("pg_ctl", "stop", "-D", str(self.data_dir), "-m", "fast", "-w",
                      "-t", str(int(STOP_TIMEOUT_S)), timeout=STOP_TIMEOUT_S + 10)
        self._stop_processes(procs)

    def __enter__(self) -> PgServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


# -- schemas and databases -------------------------------------------------------


def _require_psycopg() -> None:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip(SKIP_NO_PSYCOPG)


def _connect(url: str) -> psycopg.Connection[tuple[object, ...]]:
    import psycopg

    return psycopg.connect(url, autocommit=True, connect_timeout=10)


def _split_url(url: str) -> tuple[str, str, str, list[tuple[str, str]], str]:
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"not a postgresql:// URL: {url!r} (set {URL_ENV} to a URL)")
    return parts.scheme, parts.netloc, parts.path, parse_qsl(parts.query), parts.fragment


def schema_url(url: str, schema: str) -> str:
    """``url`` with its connections' search_path set to ``schema`` alone (libpq's
    ``options`` parameter, added to any options ``url`` already has)."""
    scheme, netloc, path, query, fragment = _split_url(url)
    option = f"-csearch_path={schema}"
    others = [(k, v) for k, v in query if k != "options"]
    options = " ".join([*(v for k, v in query if k == "options"), option])
    return urlunsplit((scheme, netloc, path,
                       urlencode([*others, ("options", options)], quote_via=quote), fragment))


def database_url(url: str, database: str) -> str:
    """``url`` pointing at another database of the same server."""
    scheme, netloc, _, query, fragment = _split_url(url)
    return urlunsplit((scheme, netloc, "/" + quote(database), urlencode(query, quote_via=quote),
                       fragment))


def _new_name() -> str:
    # Random, not per-worker counters: xdist workers and CI runs share one server.
    return "t_" + secrets.token_hex(8)


def create_schema(url: str) -> str:
    """A new empty schema ``t_<16 hex>`` in ``url``'s database; its name."""
    from psycopg import sql

    name = _new_name()
    with _connect(url) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    return name


def drop_schema(url: str, schema: str, lock_timeout: str = DROP_LOCK_TIMEOUT) -> bool:
    """DROP SCHEMA ... CASCADE, giving up after ``lock_timeout`` if a connection the
    test leaked holds a lock in it: a warning then, and False (True once dropped)."""
    import psycopg
    from psycopg import sql

    try:
        with _connect(url) as conn:
            conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(lock_timeout)))
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE")
                         .format(sql.Identifier(schema)))
    except psycopg.Error as exc:
        warnings.warn(f"test schema {schema} left behind: {exc}", stacklevel=2)
        return False
    return True


def schema_exists(url: str, schema: str) -> bool:
    """Whether ``url``'s database has a schema ``schema``."""
    with _connect(url) as conn:
        row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    return row is not None


def create_database(url: str) -> str:
    """A new database ``t_<16 hex>`` (from template0: nothing a test left in template1)."""
    from psycopg import sql

    name = _new_name()
    with _connect(url) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0")
                     .format(sql.Identifier(name)))
    return name


def drop_database(url: str, database: str) -> bool:
    """DROP DATABASE ... WITH (FORCE): the connections a test left are ended first.
    A warning and False if it could not be dropped."""
    import psycopg
    from psycopg import sql

    try:
        with _connect(url) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                         .format(sql.Identifier(database)))
    except psycopg.Error as exc:
        warnings.warn(f"test database {database} left behind: {exc}", stacklevel=2)
        return False
    return True


# -- fixtures --------------------------------------------------------------------


def _server_root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bool]:
    """Where this worker's server lives, and whether the fixture must remove it."""
    if os.geteuid() != 0:
        return tmp_path_factory.mktemp("pg"), False
    # pytest's temp dirs are private to root, so the server user could not reach a
    # cluster under them: as root the server gets its own directory in /tmp.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return Path(tempfile.mkdtemp(prefix=f"pi-workflows-pg-{worker}-")), True


class _SharedServer:
    """This process's one server: ``tests/conftest.py`` and ``e2e/conftest.py`` each
    register ``pg_url``, so a session holds two of its fixture definitions; they
    share the server, and the last one to end stops it."""

    def __init__(self) -> None:
        self.server: PgServer | None = None
        self.users = 0
        self.cleanup: Path | None = None

    def acquire(self, tmp_path_factory: pytest.TempPathFactory, bin_dir: Path) -> str:
        if self.server is None:
            root, remove = _server_root(tmp_path_factory)
            try:
                self.server = PgServer.start(root, bin_dir)
            except BaseException:
                if remove:
                    shutil.rmtree(root, ignore_errors=True)
                raise
            self.cleanup = root if remove else None
        self.users += 1
        return self.server.url

    def release(self) -> None:
        self.users -= 1
        if self.users > 0 or self.server is None:
            return
        server, self.server = self.server, None
        try:
            server.stop()
        finally:
            if self.cleanup is not None:
                shutil.rmtree(self.cleanup, ignore_errors=True)


_SHARED = _SharedServer()


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server's URL: ``$PI_WORKFLOWS_TEST_PG_URL`` (``.ci/run``'s server) if set, else a
    server started for this xdist worker and stopped after its session; a skip when
    PostgreSQL or psycopg is not installed."""
    _require_psycopg()
    url = os.environ.get(URL_ENV)
    if url:
        yield url
        return
    bin_dir = find_pg_bin()
    if bin_dir is None:
        pytest.skip(SKIP_NO_SERVER)
    yield _SHARED.acquire(tmp_path_factory, bin_dir)
    _SHARED.release()


@contextlib.contextmanager
def fresh_schema(url: str) -> Iterator[str]:
    """A URL working in a new empty schema of ``url``'s database, dropped on exit
    (``pg_schema_url``; a test wanting a second one calls this)."""
    schema = create_schema(url)
    try:
        yield schema_url(url, schema)
    finally:
        drop_schema(url, schema)


@contextlib.contextmanager
def fresh_database(url: str) -> Iterator[str]:
    """A URL of a new database on ``url``'s server, dropped on exit (``pg_database_url``)."""
    database = create_database(url)
    try:
        yield database_url(url, database)
    finally:
        drop_database(url, database)


@pytest.fixture
def pg_schema_url(pg_url: str) -> Iterator[str]:
    """A URL whose connections work in a fresh, empty schema of their own (search_path),
    dropped with all it holds after the test."""
    with fresh_schema(pg_url) as url:
        yield url


@pytest.fixture
def pg_database_url(pg_url: str) -> Iterator[str]:
    """A URL of a fresh database of its own, dropped after the test (its connections too)."""
    with fresh_database(pg_url) as url:
        yield url


# -- scripts/pg-server -----------------------------------------------------------


def main(argv: Sequence[str]) -> int:
    """``start DIR`` (print the server's URL) or ``stop DIR``."""
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: scripts/pg-server start|stop DIR", file=sys.stderr)
        return 2
    command, root = argv[0], Path(argv[1])
    try:
        if command == "start":
            print(PgServer.start(root).url)
        elif (root / _STATE_FILE).exists():
            PgServer.attach(root).stop()
    except PgStartError as exc:
        print(f"pg-server: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
