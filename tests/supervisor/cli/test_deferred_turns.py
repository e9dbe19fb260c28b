"""``start --by-agent``, ``cancel --by-agent --session S`` and the presentation refusal.

Each runs on the fast path and on the typer app (``PI_WORKFLOWS_NO_FAST_CLI=1``),
in process (``tests.helpers.cli``).
"""

from __future__ import annotations

import json
import os

import pytest
from pi_workflows.protocol.store.turns import AGENT_CANCELLED, started_by_agent

from tests.helpers.cli import CliResult, run_cli
from tests.helpers.engine import Harness

pytestmark = pytest.mark.timeout(60)

QUICK = """
workflow = define_workflow(start_at="a", nodes=[compute("a", lambda ctx: 1)],
                           presentation_prompt="Tell the user.")
"""


def _env(h: Harness, *, fast: bool) -> dict[str, str]:
    return {**os.environ, "PI_WORKFLOWS_STORE_FILE": str(h.store_path),
            "PI_WORKFLOWS_RUNS_DIR": str(h.runs),
            **({} if fast else {"PI_WORKFLOWS_NO_FAST_CLI": "1"})}


def _cli(h: Harness, fast: bool, *args: str) -> CliResult:
    return run_cli(*args, "--project", str(h.project), env=_env(h, fast=fast), cwd=h.project)


def _by_agent(h: Harness, run_id: str) -> bool:
    with h.store._db.transaction(write=False) as tx:
        return started_by_agent(tx, run_id)


@pytest.mark.parametrize("fast", [True, False])
def test_start_by_agent_is_recorded_and_the_agents_cancel_owes_a_turn(
        h: Harness, fast: bool) -> None:
    h.write("quick", QUICK)
    mine = _cli(h, fast, "start", "quick", "--session", "s1", "--by-agent", "--json")
    assert mine.returncode == 0, mine.stderr
    run = json.loads(mine.stdout)["runId"]
    assert _by_agent(h, run)
    done = _cli(h, fast, "cancel", run, "--session", "s1", "--by-agent", "--json")
    assert done.returncode == 0, done.stderr
    [intent] = h.store.claim_turn_intents("s1")[1]
    assert (intent.source_event, intent.run_id) == (AGENT_CANCELLED, run)
    person = _cli(h, fast, "start", "quick", "--session", "s2", "--json")
    run2 = json.loads(person.stdout)["runId"]
    assert not _by_agent(h, run2)
    assert _cli(h, fast, "cancel", run2, "--session", "s2", "--json").returncode == 0
    assert h.store.claim_turn_intents("s2")[1] == []  # a person's cancel: no turn


@pytest.mark.parametrize("fast", [True, False])
def test_cancel_by_agent_needs_the_session(h: Harness, fast: bool) -> None:
    env = {k: v for k, v in _env(h, fast=fast).items() if k != "PI_WORKFLOWS_SESSION"}
    done = run_cli("cancel", "r1", "--by-agent", "--json", "--project", str(h.project), env=env,
                   cwd=h.project)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "pi-workflows: error: `cancel --by-agent` acts for a session: give --session ID or set"
        " PI_WORKFLOWS_SESSION"]


@pytest.mark.parametrize("fast", [True, False])
def test_a_start_while_a_presentation_is_pending_is_refused_changing_nothing(
        h: Harness, fast: bool) -> None:
    h.write("quick", QUICK)
    run = h.launch("quick", session="s1")
    assert h.execute(run, session="s1").outcome == "completed"
    rows = len(h.store.list_runs())
    for args in (("start", "quick", "--session", "s1", "--json"),
                 ("run", "quick", "--session", "s1", "--json")):
        refused = _cli(h, fast, *args)
        assert refused.returncode == 2, refused
        assert refused.stderr.splitlines() == [
            f"pi-workflows: error: session s1 has not yet been shown the result of run {run};"
            " start again after that turn (a Pi session gives it at its next idle moment;"
            f" elsewhere `pi-workflows sync --session s1` shows it)"]
    assert len(h.store.list_runs()) == rows
    assert h.store.find_session_reservation("s1") is None
    token, [intent] = h.store.claim_turn_intents("s1")
    h.store.resolve_turn_intent(intent.intent_id, token)
    assert _cli(h, fast, "start", "quick", "--session", "s1", "--json").returncode == 0
