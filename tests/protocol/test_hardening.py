"""Hardening (issue 10): bad outputs, bad input, damaged bundles and paths fail clearly."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from pi_workflows.protocol.bundle import Bundle, BundleCorrupt, list_bundles
from pi_workflows.protocol.definitions.values import OutputError, check_output
from pi_workflows.protocol.errors import UsageError
from pi_workflows.protocol.settings import load_settings
from pi_workflows.protocol.store import Store
from pi_workflows.protocol.wakeup import MAX_SOCKET_PATH, address, poke
from pi_workflows.supervisor.cli.options import parse_input
from pi_workflows.supervisor.host.listener import Listener
from pi_workflows.supervisor.procs.reaper import find_orphans

from tests.helpers.cli import run_cli

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(("value", "words"), [
    ("caf\udce9", "not valid Unicode"),  # what os.listdir gives for a latin-1 name
    ({"name\udce9": 1}, "not valid Unicode"),
    (10 ** 5000, "more than 4300 digits"),
], ids=["surrogate", "surrogate-key", "huge-int"])
def test_an_output_that_cannot_be_written_is_refused_by_the_check(value: object,
                                                                   words: str) -> None:
    with pytest.raises(OutputError, match=words):
        check_output("n", value)


def test_a_deep_output_error_names_a_short_path() -> None:
    deep: object = 1
    for _ in range(300):
        deep = {"k": deep}
    with pytest.raises(OutputError) as caught:
        check_output("n", deep)
    assert len(caught.value.message) < 200 and "…" in caught.value.message


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000, "1" * 5000])
def test_cli_json_that_python_cannot_read_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_input(None, text)
    assert caught.value.code == "input_invalid" and len(caught.value.message) < 120


def test_cli_input_with_a_lone_surrogate_or_bad_words_is_a_usage_error(tmp_path: Path) -> None:
    flow = tmp_path / "proj" / ".pi" / "workflows"
    flow.mkdir(parents=True)
    (flow / "echo.workflow.py").write_text(
        "from pi_workflows import compute, define_workflow\n"
        "workflow = define_workflow(start_at='a', nodes=[compute('a', lambda ctx: 1)])\n")
    env = {**os.environ, "PI_WORKFLOWS_HOME": str(tmp_path / "home")}
    for args in (["--input-json", '"\\ud800"'], [os.fsdecode(b"caf\xe9")]):
        out = run_cli("run", "echo", *args, "--detach", "--project", str(tmp_path / "proj"),
                      env=env, errors="replace")
        assert out.returncode == 2, out.stderr
        assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


def test_a_usage_error_after_debug_is_one_line(tmp_path: Path) -> None:
    # `list` has no --debug of its own (`status` has: it shows a failed step's traceback).
    out = run_cli("list", "--debug", env={**os.environ, "PI_WORKFLOWS_HOME": str(tmp_path)})
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "Traceback" not in out.stderr and "No such option" in out.stderr


@pytest.mark.parametrize("content", ['{"processes": [null, 3, "x"]}', "[1, 2]", '{"processes": 7}'])
def test_processes_json_of_the_wrong_shape_does_not_stop_orphan_reaping(
        tmp_path: Path, content: str) -> None:
    bundle = tmp_path / "runs" / "r1"
    bundle.mkdir(parents=True)
    (bundle / "state.json").write_text(json.dumps({"status": "running", "traceSeq": 0}))
    (bundle / "processes.json").write_text(content)
    assert Bundle(tmp_path / "runs", "r1").processes().get("processes", []) == []
    assert find_orphans(tmp_path / "runs", "key-000000000000", set()) == []


@pytest.mark.parametrize("content", ["[]", "[1]", "3", '"x"'])
def test_a_state_json_that_is_not_an_object_is_bundle_corrupt(tmp_path: Path,
                                                              content: str) -> None:
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "state.json").write_text(content)
    with pytest.raises(BundleCorrupt, match="not a JSON object"):
        Bundle(tmp_path, "r1").raw_state()


def test_a_runs_path_that_is_a_file_is_one_clear_error(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.write_text("not a directory")
    with pytest.raises(UsageError, match="is not a directory"):
        list_bundles(runs)


def test_a_store_path_that_is_a_directory_and_a_missing_config_are_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "store").mkdir()
    with pytest.raises(UsageError, match="is a directory"):
        Store(tmp_path / "store")
    monkeypatch.setenv("PI_WORKFLOWS_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(UsageError, match=r"missing\.toml .*is missing"):
        load_settings()
    monkeypatch.setenv("PI_WORKFLOWS_CONFIG", str(tmp_path))
    with pytest.raises(UsageError, match="is a directory"):
        load_settings()


def test_the_wakeup_socket_is_a_private_file_and_a_flood_is_drained_in_batches(
        tmp_path: Path) -> None:
    state = tmp_path / "state"
    listener = Listener(state)
    try:
        sock = Path(listener.addr)
        assert sock.parent == state and stat.S_ISSOCK(sock.stat().st_mode)
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        # A flood never blocks the sender: a full queue drops the poke (the host
        # has pokes to read already); the kernel bounds the queue.
        sent = sum(poke(state) for _ in range(2000))
        assert 2 < sent < 2000
        assert listener.drain(limit=2) == 2  # one pass reads a bounded batch
        assert listener.drain() == sent - 2
    finally:
        listener.close()
    assert not sock.exists()


def test_a_state_dir_too_long_for_a_socket_uses_a_short_private_one(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    target = address(deep)
    assert target is not None and len(target) <= MAX_SOCKET_PATH
    assert not target.startswith(str(deep))
    listener = Listener(deep)
    try:
        assert poke(deep) and listener.drain() == 1
        assert stat.S_IMODE(Path(target).parent.stat().st_mode) == 0o700
    finally:
        listener.close()


def test_a_full_disk_is_named_in_the_store_error() -> None:
    import sqlite3

    from pi_workflows.protocol.errors import StoreTransientError
    from pi_workflows.protocol.store.db import classify

    exc = sqlite3.OperationalError("database or disk is full")
    exc.sqlite_errorcode = 13  # type: ignore[attr-defined]
    found = classify(exc)
    assert isinstance(found, StoreTransientError) and found.code == "disk_full"
    assert found.message.startswith("the disk is full: free some space")


def test_a_log_file_that_cannot_be_written_complains_once_and_drops_lines(
        tmp_path: Path) -> None:
    from pi_workflows.protocol.logsetup import RotatingFile

    said: list[str] = []
    target = tmp_path / "logs" / "pi-workflows.log"  # its directory does not exist
    sink = RotatingFile(target, complain=said.append)
    for i in range(200):
        sink.write(f"line {i}\n")  # never raises
    assert len(said) == 1 and "cannot write the log file" in said[0]
    target.parent.mkdir()
    sink.write("back\n")  # recovers when it can write again
    assert target.read_text() == "back\n" and stat.S_IMODE(target.stat().st_mode) == 0o600


def test_the_log_file_rotates_and_keeps_a_bounded_number(tmp_path: Path) -> None:
    from pi_workflows.protocol.logsetup import RotatingFile

    sink = RotatingFile(tmp_path / "x.log", rotate_bytes=100, keep=3)
    for i in range(50):
        sink.write(f"line {i:03d} " + "y" * 20 + "\n")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["x.log", "x.log.1", "x.log.2", "x.log.3"]
    assert "line 049" in (tmp_path / "x.log").read_text()
