"""Agent steps in the real, pinned Pi against the scripted model: the `workflow` tool
(submit, rejection and correction, update, a stale attempt), a node timeout that
aborts the model mid-stream, and one Pi child shared by a run's agent nodes."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from .agents_kit import (
    STEP_S,
    Turn,
    all_text,
    captured,
    of_type,
    pi_children,
    roles,
    stop_hosts_and_check_nothing_left,
    submit,
    tool_results,
    update,
    use_brain,
)
from .harness import Project, wait_for
from .scripted_model import Reply, Stall, Text, ToolCalls, call
from .sessions_kit import cli_argv

pytestmark = pytest.mark.slow  # real processes: an e2e drill

PLAN = """
from pi_workflows import define_workflow, agent, compute, edge

workflow = define_workflow(
    start_at="plan",
    nodes=[agent("plan", "Make a plan for the release",
                 expected_output={"type": "object", "required": ["steps"],
                                  "properties": {"steps": {"type": "array"}}}),
           compute("after", lambda ctx: {"count": len(ctx.outputs["plan"]["steps"])})],
    edges=[edge("plan", "after")],
)
"""


@pytest.mark.timeout(180)
def test_a_submission_is_checked_corrected_and_accepted_and_an_update_is_watched(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("plan", PLAN)
    steps = ["tag", "build", "publish"]

    def decide(turn: Turn) -> Reply | None:
        att = turn.attempt
        return [
            ToolCalls(update(att, "reading the changelog")),
            ToolCalls(submit("plan-0-0000aa", {"steps": steps})),  # a stale attempt
            ToolCalls(submit(att, {"stages": steps})),  # no "steps": rejected
            ToolCalls(submit(att, json.dumps({"steps": steps}))),  # JSON in a string: parsed
        ][turn.index] if turn.node == "plan" and turn.n == 1 and turn.index < 4 else None

    with use_brain(project, tmp_path, decide) as brain:
        project.start_host()
        run_id = project.detach("plan")
        watcher = subprocess.Popen(cli_argv(project, "watch", run_id), env=project.env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = watcher.communicate(timeout=120)
        assert watcher.returncode == 0, (out, err, brain.describe())
        assert project.row(run_id).state == "done"

        # The accepted output is the validated value, parsed from its JSON text.
        state = project.state(run_id)
        assert state["outputs"]["plan"] == {"steps": steps}
        assert state["finalOutput"] == {"count": 3}

        # Four model requests, each answering what the bridge told the model last.
        assert brain.model is not None
        first, stale, wrong, right = brain.model.completions
        assert brain.model.remaining == 0 and not brain.model.problems, brain.describe()
        (attempt,) = {t.attempt for t in brain.turns}
        assert tool_results(stale)[-1] == "Progress recorded; carry on with the step."
        assert f"but the step in progress is 'plan' attempt '{attempt}'" in \
            tool_results(wrong)[-1]
        assert tool_results(right)[-1] == ("Submission rejected: output is missing required"
                                           " field 'steps'. Fix the result and submit again.")
        assert "Workflow step contract (pi-workflows): workflow plan, step plan," \
               f" attempt {attempt}." in first.texts("user")[0]
        # The accepted submit ended the turn (terminate): no fifth request.
        assert len(brain.model.completions) == 4

        # The update is in the trace and `watch` showed it (and the rest of the run).
        events = project.events(run_id)
        updates = of_type(events, "update_published")
        assert [(e["nodeId"], e["attemptId"], e["payload"]["message"]) for e in updates] == \
            [("plan", attempt, "reading the changelog")]
        assert "plan: reading the changelog" in out
        assert "plan: prompt sent to the agent" in out
        assert 'completed: {"count": 3}' in out.splitlines()[-1]
        finished = [e for e in of_type(events, "node_finished") if e["nodeId"] == "plan"]
        assert [e["payload"]["output"] for e in finished] == [{"steps": steps}]

        # The capture has every tool call of the attempt, the rejections as errors.
        tools = [(c["kind"], c.get("isError")) for c in captured(project, run_id)
                 if c["kind"] in ("tool_start", "tool_end")]
        assert tools == [("tool_start", None), ("tool_end", False)] * 1 + \
            [("tool_start", None), ("tool_end", True)] * 2 + \
            [("tool_start", None), ("tool_end", False)]
        stop_hosts_and_check_nothing_left(project)


TIMEOUT = """
from pi_workflows import define_workflow, agent, compute, edge, switch

workflow = define_workflow(
    start_at="warm",
    nodes=[agent("warm", "Say you are ready"),
           agent("slow", "Think hard", timeout=3),
           agent("recover", lambda ctx: f"The last step ended {ctx.results['slow']['outcome']}."
                                        " Say what to do next."),
           compute("end", lambda ctx: {"slow": ctx.results["slow"]["outcome"],
                                       "next": ctx.outputs["recover"]}),
           compute("after", lambda ctx: {"slow": "ok"})],
    edges=[edge("warm", "slow"),
           switch("slow", "$result.outcome", {"timed_out": "recover", "ok": "after"}),
           edge("recover", "end")],
)
"""


@pytest.mark.timeout(150)
def test_a_node_timeout_aborts_the_model_mid_stream_and_routes_on_the_outcome(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("slowly", TIMEOUT)
    # Held far longer than the node may take: only an abort by Pi ends it in time.
    stall = Stall("Let me think", " about this", timeout=90)

    def decide(turn: Turn) -> Reply | None:
        if turn.node == "warm" and turn.index == 0:
            return ToolCalls(submit(turn.attempt, "ready"))
        if turn.node == "slow" and turn.n == 1 and turn.index == 0:
            return stall
        if turn.node == "recover" and turn.index == 0:
            return ToolCalls(submit(turn.attempt, "retry with a smaller task"))
        return None

    with use_brain(project, tmp_path, decide) as brain:
        run = subprocess.Popen(cli_argv(project, "run", "slowly"), env=project.env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            stall.wait_reached(STEP_S)  # the model is mid-response
            reached = time.monotonic()
            assert stall.wait_done(STEP_S) == "disconnected", brain.describe()
            aborted_after = time.monotonic() - reached
            out, err = run.communicate(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
                run.communicate()
        assert run.returncode == 0, (out, err, brain.describe())
        # Pi hung up on the stream at the deadline (3 s from the node's start), not at
        # the stall's 90 s.
        assert aborted_after < 10
        run_id = out.splitlines()[0].split()[1]
        state = project.state(run_id)
        assert state["status"] == "completed"
        assert state["results"]["slow"]["outcome"] == "timed_out"
        assert state["results"]["slow"]["errorCode"] == "node_timed_out"
        assert state["finalOutput"] == {"slow": "timed_out", "next": "retry with a smaller task"}
        (failed,) = [e for e in of_type(project.events(run_id), "node_failed")]
        assert failed["nodeId"] == "slow" and failed["payload"]["next"] == "recover"
        assert failed["payload"]["result"]["outcome"] == "timed_out"
        assert "slow: timed_out [node_timed_out]" in out and "-> recover" in out
        # Pi itself ended the streamed message as aborted (not a dropped connection).
        slow_attempt = brain.of("slow")[0].attempt
        wait_for(lambda: [c for c in captured(project, run_id)
                          if c["attemptId"] == slow_attempt and c["kind"] == "message_end"
                          and c.get("stopReason") == "aborted"],
                 timeout=10, what="the aborted message in the capture")
        # The same Pi goes on after the abort, in the same conversation.
        assert brain.model is not None and not brain.model.problems, brain.describe()
        assert len(brain.model.completions) == 3
        (recover,) = brain.of("recover")
        assert recover.request.texts("user")[-1].startswith("The last step ended timed_out.")
        assert f"step slow, attempt {slow_attempt}." in all_text(recover.request)
        assert len(roles(project, run_id, "pi")) == 1
        stop_hosts_and_check_nothing_left(project)


TWO = """
from pi_workflows import define_workflow, agent, compute, edge

workflow = define_workflow(
    start_at="research",
    nodes=[agent("research", "Find the three biggest files"),
           agent("summary", "Summarise what you found"),
           compute("end", lambda ctx: {"summary": ctx.outputs["summary"]})],
    edges=[edge("research", "summary"), edge("summary", "end")],
)
"""


@pytest.mark.timeout(150)
def test_two_agent_nodes_share_one_pi_and_one_conversation(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("two", TWO)
    seen_pis: dict[str, list[tuple[int, float]]] = {}

    def decide(turn: Turn) -> Reply | None:
        if turn.n != 1:
            return None
        # The Pi processes of this project at the moment the model is asked.
        seen_pis[f"{turn.node}/{turn.index}"] = pi_children(project)
        if turn.node == "research":
            return [Text("The biggest files are a.bin, b.bin and c.bin."),
                    ToolCalls(submit(turn.attempt, ["a.bin", "b.bin", "c.bin"]))][turn.index] \
                if turn.index < 2 else None
        if turn.node == "summary" and turn.index == 0:
            return ToolCalls(submit(turn.attempt, "three large binaries"))
        return None

    with use_brain(project, tmp_path, decide) as brain:
        # The first turn ends without a submission (plain text): the reminder follows.
        done = project.cli("run", "two", "--json", timeout=120)
        status = json.loads(done.stdout)
        assert status["runStatus"] == "completed", (status, brain.describe())
        run_id = status["runId"]
        assert project.state(run_id)["finalOutput"] == {"summary": "three large binaries"}

        pis = roles(project, run_id, "pi")
        assert len(pis) == 1, project.state_processes(run_id)
        pid = pis[0]["pid"]
        assert set(seen_pis) == {"research/0", "research/1", "summary/0"}
        for key, procs in seen_pis.items():
            assert [p for p, _ in procs] == [pid], (key, procs)
        assert len({tuple(v) for v in seen_pis.values()}) == 1  # the same process each time

        assert brain.model is not None
        research_reminded, summary = brain.model.completions[1:]
        assert "You ended your turn without an accepted submission for workflow step" \
               " research" in research_reminded.texts("user")[-1]
        # The second node's request carries the first node's whole exchange, in order.
        research_attempt = brain.of("research")[0].attempt
        history = all_text(summary)
        markers = [f"step research, attempt {research_attempt}.",
                   "The biggest files are a.bin, b.bin and c.bin.",
                   "You ended your turn without an accepted submission",
                   '"output": ["a.bin", "b.bin", "c.bin"]',
                   "Accepted: the step is complete.",
                   "Summarise what you found"]
        positions = [history.find(m) for m in markers]
        assert -1 not in positions and positions == sorted(positions), (markers, positions)
        assert summary.texts("user")[-1].startswith("Summarise what you found")
        assert len(brain.model.completions) == 3 and not brain.model.problems
        stop_hosts_and_check_nothing_left(project)


@pytest.mark.timeout(120)
def test_run_and_watch_show_the_agents_text_and_tool_calls(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("plan", PLAN)

    def decide(turn: Turn) -> Reply | None:
        if turn.node != "plan" or turn.n != 1:
            return None
        return [ToolCalls(call("bash", {"command": "echo captured-42"}),
                          text="Checking the changelog first."),
                ToolCalls(submit(turn.attempt, {"steps": ["one"]}))][turn.index] \
            if turn.index < 2 else None

    with use_brain(project, tmp_path, decide) as brain:
        done = project.cli("run", "plan", timeout=120)
        run_id = done.stdout.splitlines()[0].split()[1]
        assert project.state(run_id)["status"] == "completed", brain.describe()
        kinds = [c["kind"] for c in captured(project, run_id)]
        assert "text" in kinds and "tool_start" in kinds  # the capture has them
        watched = project.cli("watch", run_id, timeout=60).stdout
        stop_hosts_and_check_nothing_left(project)
    for view in (done.stdout, watched):
        assert "Checking the changelog first." in view and "echo captured-42" in view, view
