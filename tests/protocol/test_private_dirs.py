"""Private directories and the wakeup socket in shared places (issue 21, items 17 and 18).

Another local user may plant a link, or a directory of their own, where ours
goes (the wakeup socket's fallback under the temporary directory): the
directory is refused and left as it was, and no client pokes a socket there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pi_workflows.protocol.errors import UnsafeDirectory, UsageError
from pi_workflows.protocol.paths import ensure_private_dir
from pi_workflows.protocol.wakeup import address, poke, short_dir
from pi_workflows.supervisor.host.listener import Listener

pytestmark = pytest.mark.timeout(30)

OTHER_UID = 65534  # nobody
needs_root = pytest.mark.skipif(os.getuid() != 0,
                                reason="making a directory another user owns needs root")


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_planted_link_is_refused_and_its_target_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "victim"
    target.mkdir()
    os.chmod(target, 0o755)
    planted = tmp_path / "pi-workflows-1000"
    planted.symlink_to(target)
    with pytest.raises(UsageError, match="symbolic link") as caught:
        ensure_private_dir(planted)
    assert str(planted) in caught.value.message and "\n" not in caught.value.message
    assert _mode(target) == 0o755 and not any(target.iterdir())


def test_a_dangling_link_is_refused_not_created_through(tmp_path: Path) -> None:
    planted = tmp_path / "dangling"
    planted.symlink_to(tmp_path / "nowhere")
    with pytest.raises(UnsafeDirectory, match="symbolic link"):
        ensure_private_dir(planted)
    assert not (tmp_path / "nowhere").exists()


def test_a_file_is_refused_as_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(NotADirectoryError, match="not a directory"):
        ensure_private_dir(tmp_path / "f")


@needs_root
def test_a_directory_another_user_owns_is_refused_and_left_alone(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chmod(theirs, 0o755)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    with pytest.raises(UsageError, match=f"owned by another user \\(uid {OTHER_UID}\\)"):
        ensure_private_dir(theirs)
    assert _mode(theirs) == 0o755


def test_our_own_directories_are_made_and_tightened(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        made = ensure_private_dir(tmp_path / "a" / "b")
        assert _mode(tmp_path / "a") == 0o700 and _mode(made) == 0o700
        loose = tmp_path / "loose"
        loose.mkdir(mode=0o755)
        assert _mode(loose) == 0o755
        assert ensure_private_dir(loose) == loose and _mode(loose) == 0o700
        assert ensure_private_dir(loose) == loose  # again: nothing to do
    finally:
        os.umask(old)


@pytest.fixture
def short_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary directory short enough for a socket path, private to this test."""
    root = Path(tempfile.mkdtemp(prefix="pw", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _bind(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setblocking(False)
    sock.bind(path)
    return sock


def _received(sock: socket.socket) -> int:
    count = 0
    with contextlib.suppress(BlockingIOError):
        while True:
            sock.recv(64)
            count += 1
    return count


@needs_root
@pytest.mark.parametrize("owner", ["directory", "socket"])
def test_no_poke_goes_to_a_socket_another_user_owns(short_tmp: Path, tmp_path: Path,
                                                    owner: str) -> None:
    deep = tmp_path / ("d" * 120)  # too long for a socket: the fallback directory
    target = address(deep)
    assert target is not None and Path(target).parent == short_dir()
    short_dir().mkdir(mode=0o700)
    sock = _bind(target)
    try:
        # The other user took the fallback name first (or bound the socket in it).
        if owner == "directory":
            os.chown(short_dir(), OTHER_UID, OTHER_UID)
        os.chown(target, OTHER_UID, OTHER_UID)
        assert not poke(deep)
        assert _received(sock) == 0
        if owner == "directory":
            with pytest.raises(UnsafeDirectory, match="owned by another user"):
                Listener(deep)  # and the host does not listen there either
    finally:
        sock.close()


def test_no_poke_goes_into_a_directory_others_may_enter(short_tmp: Path,
                                                        tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    target = address(deep)
    assert target is not None
    short_dir().mkdir(mode=0o700)
    sock = _bind(target)
    try:
        os.chmod(short_dir(), 0o777)
        assert not poke(deep) and _received(sock) == 0
        os.chmod(short_dir(), 0o700)
        assert poke(deep) and _received(sock) == 1
    finally:
        sock.close()


def test_our_own_fallback_directory_still_gets_the_poke(short_tmp: Path,
                                                        tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    listener = Listener(deep)
    try:
        expected = short_tmp / f"pi-workflows-{os.getuid()}"
        assert Path(listener.addr).parent == short_dir() == expected
        assert poke(deep) and listener.drain() == 1
    finally:
        listener.close()
