"""What the Pi extension needs from the Python side: its path as package data, the
two-step follow-up delivery (lease with a token, deliver, resolve), and the
session runner's stdin lifeline."""

from __future__ import annotations

import json
import os
import threading
import tomllib
from pathlib import Path

import pytest
from pi_workflows.protocol.errors import TransitionRefused
from pi_workflows.protocol.store import RunSource, Store
from pi_workflows.supervisor.cli.commands.pi_extension import EXTENSION
from pi_workflows.supervisor.session import sync
from pi_workflows.supervisor.session.lifeline import stdin_lifeline

from tests.helpers.cli import run_cli
from tests.helpers.clocks import FakeClock

pytestmark = pytest.mark.timeout(60)
REPO = Path(__file__).resolve().parents[3]
SOURCE = RunSource("flow", "/p/.pi/workflows/flow.workflow.py", "ab" * 32, "sha256:x")


def test_pi_extension_prints_the_shipped_file() -> None:
    plain = run_cli("pi-extension")
    assert plain.returncode == 0 and plain.stdout.strip() == str(EXTENSION)
    assert json.loads(run_cli("pi-extension", "--json").stdout) == {"path": str(EXTENSION)}
    assert EXTENSION.is_file() and EXTENSION.is_absolute()
    assert "export default function" in EXTENSION.read_text()
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "*.ts" in data["tool"]["setuptools"]["package-data"]["pi_workflows.supervisor.piext"]


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock[int]) -> Store:
    return Store(tmp_path / "store.sqlite3", clock=clock, lease_ms=10_000)


def _failed_launch(store: Store) -> None:
    store.reserve("r1", SOURCE, {"task": "private words"}, "s1")
    token = store.claim_by_id("r1", "me", session="s1").token
    store.fail("r1", token, "source_changed", "the workflow file changed; start it again.")


def test_a_held_follow_up_stays_pending_until_resolved_with_its_token(
        store: Store, clock: FakeClock[int], tmp_path: Path) -> None:
    _failed_launch(store)
    held = sync.take(store, tmp_path, "s1", hold_follow_ups=True)
    [shown] = held.as_json()["followUps"]
    assert shown["token"] and shown["runId"] == "r1" and "private words" not in shown["message"]
    sync.delivered(store, held)  # confirms the watermark; the follow-up is not resolved
    intent = store.get_turn_intent(shown["intentId"])
    assert intent is not None and intent.state == "pending"
    # Within the lease no other sync gets it; a client that died before resolving
    # gets it again after the lease, with a new token (and finds it in its transcript).
    assert sync.take(store, tmp_path, "s1", hold_follow_ups=True).follow_ups == []
    clock.advance(10_001)
    again = sync.take(store, tmp_path, "s1", hold_follow_ups=True)
    [retry] = again.as_json()["followUps"]
    assert retry["intentId"] == shown["intentId"] and retry["token"] != shown["token"]
    with pytest.raises(TransitionRefused):
        store.resolve_turn_intent(shown["intentId"], shown["token"])  # the stale lease
    store.resolve_turn_intent(retry["intentId"], retry["token"])
    clock.advance(10_001)
    assert sync.take(store, tmp_path, "s1", hold_follow_ups=True).follow_ups == []


def test_a_plain_sync_still_resolves_before_it_shows(store: Store, tmp_path: Path) -> None:
    _failed_launch(store)
    snapshot = sync.take(store, tmp_path, "s1")
    [shown] = snapshot.as_json()["followUps"]
    assert "token" not in shown
    intent = store.get_turn_intent(shown["intentId"])
    assert intent is not None and intent.state == "resolved"
    assert snapshot.as_json()["runs"][0]["mine"] is True


def test_resolve_follow_up_through_the_cli(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    flows = project / ".pi" / "workflows"
    flows.mkdir(parents=True)
    (flows / "quick.workflow.py").write_text(
        "from pi_workflows import define_workflow, compute\n"
        "workflow = define_workflow(start_at='one', nodes=[compute('one', lambda c: {})])\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PI_WORKFLOWS_")}
    env["PI_WORKFLOWS_HOME"] = str(tmp_path / "home")
    where = ("--project", str(project))
    out = run_cli("start", "quick", "--session", "s1", "--json", *where, env=env)
    assert out.returncode == 0, out.stderr
    (flows / "quick.workflow.py").write_text("syntax error here\n")
    assert run_cli("activate", "--session", "s1", *where, env=env).returncode == 1
    snap = json.loads(run_cli("sync", "--session", "s1", "--hold-follow-ups", "--json", *where,
                           env=env).stdout)
    [fu] = snap["followUps"]
    wrong = run_cli("resolve-follow-up", fu["intentId"], "--token", "nope", "--json", *where,
                 env=env)
    assert wrong.returncode == 2 and wrong.stderr.startswith("pi-workflows: error: ")
    assert len(wrong.stderr.splitlines()) == 1
    ok = run_cli("resolve-follow-up", fu["intentId"], "--token", fu["token"], "--json", *where,
              env=env)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == {"intentId": fu["intentId"], "resolved": True}
    later = json.loads(run_cli("sync", "--session", "s1", "--hold-follow-ups", "--json", *where,
                            env=env).stdout)
    assert later["followUps"] == []


def test_the_stdin_lifeline_stops_once_the_pipe_closes() -> None:
    read, write = os.pipe()
    stopped = threading.Event()
    try:
        stdin_lifeline(stopped.set, fd=read)
        os.write(write, b"still here\n")
        assert not stopped.wait(0.2)  # data is not the end
        os.close(write)
        write = -1
        assert stopped.wait(10)
    finally:
        if write >= 0:
            os.close(write)
        os.close(read)
