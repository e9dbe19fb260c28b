"""Seed 000's acceptance drill for agent steps: a run started in a terminal whose window
is closed while the model is mid-response is resumed (by a running host, or later by
`resume` and a host) at the interrupted node, in the same Pi conversation, which is
the session file in the run's bundle; `chat` refuses while the run executes and
`export` renders the conversation once it is over."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
import pytest

from .agents_kit import (
    STEP_S,
    Brain,
    Terminal,
    Turn,
    all_text,
    gone,
    marked,
    of_type,
    only_run_id,
    roles,
    session_file,
    stop_hosts_and_check_nothing_left,
    submit,
    update,
    use_brain,
    wait_queue,
)
from .harness import Project, wait_for
from .pi_env import PiRpc
from .scripted_model import Reply, Stall, ToolCalls, message_text
from .snippets import HOLD

pytestmark = pytest.mark.slow  # real processes: an e2e drill

DRAFT = """
from pi_workflows import define_workflow, agent, compute, edge

workflow = define_workflow(
    start_at="plan",
    nodes=[agent("plan", "Plan the release notes",
                 expected_output={"type": "object", "required": ["steps"]}),
           agent("write", "Write the release notes",
                 expected_output={"type": "object", "required": ["text"]}),
           compute("done", lambda ctx: {"notes": ctx.outputs["write"]["text"]})],
    edges=[edge("plan", "write"), edge("write", "done")],
)
"""
NOTES = "v2: faster resumes"


def run_processes(project: Project, run_id: str) -> dict[str, psutil.Process]:
    """The run's worker and Pi now, as identity-checked handles."""
    found = {}
    for role in ("worker", "pi"):
        (entry,) = roles(project, run_id, role)
        found[role] = psutil.Process(entry["pid"])
    return found


def conversation(brain: Brain, project: Project, run_id: str, tmp: Path) -> list[dict[str, Any]]:
    """The run's conversation as Pi itself reads it: a copy of the bundle's session file
    opened by `pi --mode rpc --session` (the isolated env, in the project directory)."""
    copy = tmp / "conversation.jsonl"
    shutil.copyfile(session_file(project, run_id), copy)
    assert brain.pi_env is not None
    with PiRpc(replace(brain.pi_env, cwd=project.root), "--session", str(copy),
               session=True) as pi:
        response = pi.request({"type": "get_messages"}, STEP_S)
    assert response.get("success"), response
    return list(response["data"]["messages"])


def texts(messages: list[dict[str, Any]], role: str) -> list[str]:
    return [message_text(m) for m in messages if m.get("role") == role]


@pytest.mark.timeout(240)
def test_a_closed_terminal_mid_response_is_resumed_by_the_host_in_the_same_conversation(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("draft", DRAFT)
    stall = Stall("Writing the", " notes", timeout=120)

    def decide(turn: Turn) -> Reply | None:
        if turn.index != 0:
            return None
        if turn.node == "plan" and turn.n == 1:
            return ToolCalls(submit(turn.attempt, {"steps": ["collect", "write"]}))
        if turn.node == "write":
            return stall if turn.n == 1 else ToolCalls(submit(turn.attempt, {"text": NOTES}))
        return None

    with use_brain(project, tmp_path, decide) as brain:
        host = project.start_host()
        term = Terminal(project, "run", "draft", "--session", "s1")
        try:
            stall.wait_reached(STEP_S)  # the model is mid-response in `write`
            run_id = only_run_id(project)
            term.wait_text("write: prompt sent to the agent")
            first = run_processes(project, run_id)
            # One writer per conversation: `chat` refuses while the run executes.
            chat = project.cli("chat", run_id, check=False, timeout=30)
            assert chat.returncode == 2, (chat.stdout, chat.stderr)
            assert chat.stdout == "" and len(chat.stderr.strip().splitlines()) == 1
            assert f"run {run_id} is running" in chat.stderr
            assert stall.outcome is None  # it changed nothing

            term.hang_up()  # the window is closed: SIGHUP
            assert stall.wait_done(STEP_S) == "disconnected", brain.describe()
            term.proc.wait(STEP_S)
            wait_queue(project, run_id, "done", brain=brain)
        finally:
            term.close()

        state = project.state(run_id)
        assert state["status"] == "completed" and state["finalOutput"] == {"notes": NOTES}
        for role, proc in first.items():
            assert gone(proc), f"the terminal's {role} {proc.pid} is still running"
        # The host took the parked run and resumed it at `write`, with a Pi of its own.
        events = project.events(run_id)
        (resumed,) = of_type(events, "run_resumed")
        assert resumed["payload"]["resumePoint"] == "write"
        assert [e["nodeId"] for e in of_type(events, "node_started")] == \
            ["plan", "write", "write", "done"]
        pis = roles(project, run_id, "pi")
        assert len(pis) == 2 and pis[1]["runnerId"] == host.runner_id != pis[0]["runnerId"]

        # The re-prompt has a new attempt id and comes after the earlier messages.
        plan, write1, write2 = (brain.of("plan")[0], brain.of("write", 1)[0],
                                brain.of("write", 2)[0])
        assert write1.attempt != write2.attempt
        history = all_text(write2.request)
        for earlier in (f"step plan, attempt {plan.attempt}.", '"steps": ["collect", "write"]',
                        "Accepted: the step is complete.",
                        f"step write, attempt {write1.attempt}."):
            assert earlier in history, (earlier, history[-3000:])
        assert f"step write, attempt {write2.attempt}." in write2.request.texts("user")[-1]
        assert len(brain.turns) == 3, brain.describe()

        # sync catches the session up: its run completed (shown once).
        synced = project.cli("sync", "--session", "s1").stdout.splitlines()
        assert f"{run_id}  draft  completed: {json.dumps({'notes': NOTES})}" in synced, synced
        again = json.loads(project.cli("sync", "--session", "s1", "--json").stdout)
        assert again["runs"] == [], again

        # The conversation file, private in the bundle, holds the workflow's messages.
        path = session_file(project, run_id)
        assert path.stat().st_mode & 0o777 == 0o600
        messages = conversation(brain, project, run_id, tmp_path)
        users = texts(messages, "user")
        for attempt in (plan.attempt, write1.attempt, write2.attempt):
            assert sum(f"attempt {attempt}." in text for text in users) == 1, (attempt, users)
        results = [m for m in messages if m.get("role") == "toolResult"]
        assert [message_text(m) for m in results] == ["Accepted: the step is complete."] * 2

        # Over: chat would open it now (refused no more), export renders it.
        page = tmp_path / "conversation.html"
        exported = project.cli("export", run_id, "--html", str(page))
        assert exported.stdout.strip() == str(page)
        html = page.read_text()
        assert html.lstrip().lower().startswith("<!doctype html") and "</html>" in html
        # `chat` opens the conversation in an interactive Pi on a terminal.
        chat_term = Terminal(project, "chat", run_id)
        try:
            chat_term.wait_text("Accepted: the step is complete.")
            chat_term.wait_text(NOTES)
            chat_term.wait_text(str(project.root))
        finally:
            chat_term.close()
        stop_hosts_and_check_nothing_left(project)


@pytest.mark.timeout(240)
def test_without_a_host_the_interrupted_run_stays_parked_until_resume_and_a_host(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("draft", DRAFT)
    # Interrupted in the first node: its first turn (an update) made the session file.
    stall = Stall("Planning", timeout=120)

    def decide(turn: Turn) -> Reply | None:
        if turn.node == "plan" and turn.n == 1:
            return [ToolCalls(update(turn.attempt, "looking at the commits")),
                    stall][turn.index] if turn.index < 2 else None
        if turn.index == 0:
            output = {"steps": ["collect"]} if turn.node == "plan" else {"text": NOTES}
            return ToolCalls(submit(turn.attempt, output))
        return None

    with use_brain(project, tmp_path, decide) as brain:
        term = Terminal(project, "run", "draft", "--session", "s2")
        try:
            stall.wait_reached(STEP_S)
            run_id = only_run_id(project)
            first = run_processes(project, run_id)
            term.hang_up()
            assert stall.wait_done(STEP_S) == "disconnected", brain.describe()
            term.proc.wait(STEP_S)
        finally:
            term.close()
        wait_queue(project, run_id, "parked", timeout=STEP_S, brain=brain)
        # Parked means nothing runs: the worker and Pi are gone, and nothing takes it.
        wait_for(lambda: all(gone(p) for p in first.values()), timeout=10,
                 what="the terminal's worker and Pi to exit")
        assert not marked(project)
        assert project.row(run_id).state == "parked"
        state = project.state(run_id)
        assert state["status"] == "running" and state["currentNode"] == "plan"
        assert len(brain.turns) == 2

        resumed = json.loads(project.cli("resume", run_id, "--json").stdout)
        assert resumed["runId"] == run_id
        project.start_host()
        wait_queue(project, run_id, "done", brain=brain)

        state = project.state(run_id)
        assert state["status"] == "completed" and state["finalOutput"] == {"notes": NOTES}
        (event,) = of_type(project.events(run_id), "run_resumed")
        assert event["payload"]["resumePoint"] == "plan"
        plan1, plan2 = brain.of("plan", 1), brain.of("plan", 2)
        assert len(plan1) == 2 and len(plan2) == 1, brain.describe()
        history = all_text(plan2[0].request)
        for earlier in (f"step plan, attempt {plan1[0].attempt}.", "looking at the commits",
                        "Progress recorded; carry on with the step."):
            assert earlier in history, (earlier, history[-3000:])
        assert f"step plan, attempt {plan2[0].attempt}." in plan2[0].request.texts("user")[-1]
        messages = conversation(brain, project, run_id, tmp_path)
        assert sum(f"attempt {plan2[0].attempt}." in t for t in texts(messages, "user")) == 1
        stop_hosts_and_check_nothing_left(project)


HELD = HOLD + """
from pi_workflows import define_workflow, compute, edge

workflow = define_workflow(
    start_at="hold",
    nodes=[compute("hold", hold("hold")), compute("end", lambda ctx: {"ok": True})],
    edges=[edge("hold", "end")],
)
"""


@pytest.mark.timeout(90)
def test_the_run_command_of_a_closed_terminal_waits_for_the_park_and_exits_parked(
        project: Project) -> None:
    project.write_workflow("held", HELD)
    term = Terminal(project, "run", "held", "--session", "s3")
    try:
        wait_for(lambda: project.lines("hold.started"), timeout=STEP_S, what="node running")
        run_id = only_run_id(project)
        term.hang_up()
        code = term.proc.wait(STEP_S)
        at_exit = project.row(run_id).state
    finally:
        term.close()
    wait_queue(project, run_id, "parked", timeout=STEP_S)  # parked either way
    assert (code, at_exit) == (4, "parked")


@pytest.mark.timeout(240)
def test_a_run_interrupted_in_its_very_first_model_reply_resumes_and_completes(
        project: Project, tmp_path: Path) -> None:
    # Pi writes its session file only once the first assistant message exists: here
    # the terminal closes before that, so the resumed Pi may find no conversation yet.
    project.write_workflow("draft", DRAFT)
    stall = Stall("Pla", timeout=120)

    def decide(turn: Turn) -> Reply | None:
        if turn.node == "plan" and turn.n == 1:
            return stall if turn.index == 0 else None
        if turn.index == 0:
            output = {"steps": ["collect"]} if turn.node == "plan" else {"text": NOTES}
            return ToolCalls(submit(turn.attempt, output))
        return None

    with use_brain(project, tmp_path, decide) as brain:
        project.start_host()
        term = Terminal(project, "run", "draft", "--session", "s4")
        try:
            stall.wait_reached(STEP_S)
            run_id = only_run_id(project)
            term.hang_up()
            assert stall.wait_done(STEP_S) == "disconnected", brain.describe()
            term.proc.wait(STEP_S)
        finally:
            term.close()
        wait_queue(project, run_id, "done", brain=brain)
        state = project.state(run_id)
        assert state["status"] == "completed" and state["finalOutput"] == {"notes": NOTES}
        (event,) = of_type(project.events(run_id), "run_resumed")
        assert event["payload"]["resumePoint"] == "plan"
        plan2 = brain.of("plan", 2)
        assert len(plan2) == 1 and len(brain.of("write")) == 1, brain.describe()
        messages = conversation(brain, project, run_id, tmp_path)
        users = texts(messages, "user")
        assert sum(f"attempt {plan2[0].attempt}." in t for t in users) == 1, users
        assert any(f"step write, attempt {brain.of('write')[0].attempt}." in t for t in users)
        stop_hosts_and_check_nothing_left(project)
