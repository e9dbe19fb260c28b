"""``pi-workflows status RUN`` for a person: the facts of each state and a command that works.

Real runs through the store and ``execute_claim`` (``Harness``), the CLI
called in process from outside the project, so every printed command
carries its ``--project``; each suggested command is run as pasted.
"""

from __future__ import annotations

import json
import shlex

import pytest
from pi_workflows.protocol.store import Store

from tests.helpers.cli import CliResult, run_cli
from tests.helpers.definitions import approve_flow
from tests.helpers.engine import Crash, Harness, crash_on
from tests.helpers.store import put_in_state

pytestmark = pytest.mark.timeout(60)

CHECK = approve_flow('ship plan p to production?')
LONG = """
workflow = define_workflow(
    start_at="talk",
    nodes=[compute("talk", lambda ctx: "\\n".join(f"line {i}" for i in range(100)))],
)
"""
BROKEN = """
def build(ctx):
    raise RuntimeError("the build is broken; password=hunter2")

workflow = define_workflow(
    start_at="fetch",
    nodes=[compute("fetch", lambda ctx: {"data": 1}), compute("build", build)],
    edges=[edge("fetch", "build")],
)
"""


def _status(h: Harness, run_id: str) -> str:
    done = run_cli("status", run_id, "--project", str(h.project), cwd=h.root)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def _command(h: Harness, text: str, what: str) -> list[str]:
    """The command printed after ``what:``, as words (``pi-workflows`` left off)."""
    (line,) = [line for line in text.splitlines() if line.strip().startswith(what + ":")]
    words = shlex.split(line.split(": ", 1)[1])
    assert words[0] == "pi-workflows" and words[-2:] == ["--project", str(h.project)]
    return words[1:]


def _paste(h: Harness, words: list[str]) -> CliResult:
    return run_cli(*words, cwd=h.root)


def test_a_waiting_run_shows_its_question_and_the_answer_command_that_works(
        cli: Harness) -> None:
    cli.write("check", CHECK)
    run_id = cli.launch("check", {})
    assert cli.execute(run_id).outcome == "waiting"
    text = _status(cli, run_id)
    assert text.startswith(f"{run_id}  check  waiting at approve")
    assert "  started " in text and "took" in text
    assert "waiting for an answer at approve\n    ship plan p to production?\n" in text
    words = _command(cli, text, "answer it")
    assert words[:3] == ["answer", run_id, "your answer"]
    answered = _paste(cli, ["answer", run_id, "yes", *words[3:]])
    assert answered.returncode == 0, answered.stderr
    child = answered.stdout.strip()
    text = _status(cli, run_id)
    assert f"answered: the chain goes on as {child} (queued)" in text
    assert "    approve  answered" in text


def test_a_completed_run_shows_its_final_output_bounded_with_where_to_see_it_all(
        cli: Harness) -> None:
    cli.write("long", LONG)
    run_id = cli.launch("long", {})
    assert cli.execute(run_id).outcome == "completed"
    text = _status(cli, run_id)
    assert "  output:\n    line 0\n" in text and "    line 19\n" in text
    assert "line 20" not in text  # bounded
    (hint,) = [line for line in text.splitlines() if "cut short" in line]
    whole = run_cli(*shlex.split(hint.split("`")[1])[1:], cwd=cli.root)
    assert json.loads(whole.stdout)["finalOutput"].endswith("line 99")
    assert _paste(cli, _command(cli, text, "every step's output")).returncode == 0


def test_a_failed_run_shows_its_redacted_error_and_the_logs_and_fork_commands(
        cli: Harness) -> None:
    cli.write("broken", BROKEN)
    run_id = cli.launch("broken", {})
    assert cli.execute(run_id).outcome == "failed"
    text = _status(cli, run_id)
    assert "    fetch  done" in text and "    build  failed" in text
    assert "  failed at build: node 'build': RuntimeError: the build is broken" in text
    assert "[node_error]" in text and "hunter2" not in text
    logs = _paste(cli, _command(cli, text, "see its output"))
    assert logs.returncode == 0 and "=== build" in logs.stdout
    forked = _paste(cli, _command(cli, text, "run it again from there"))
    assert forked.returncode == 0, forked.stderr
    fork = forked.stdout.strip()
    assert cli.execute(fork).outcome == "failed"
    text = _status(cli, fork)
    assert f"(fork of {run_id} from build)" in text
    assert "    fetch  carried" in text and f"(from {run_id})" in text
    assert "skipped" not in text


def test_a_parked_run_says_why_and_what_resumes_it(cli: Harness) -> None:
    plain, blocked = "20990101T000000Z-demo-0000abcd", "20990101T000001Z-demo-0000abce"
    with Store(cli.store_path) as store:
        put_in_state(store, plain, "parked")
        token = put_in_state(store, blocked, "running")
        store.park(blocked, token, code="source_changed", message="the workflow file changed")
    text = _status(cli, plain)
    assert "  parked: it continues where it stopped once a runner takes it" in text
    assert _command(cli, text, "or run it here now")[:3] == ["resume", plain, "--here"]
    text = _status(cli, blocked)
    assert "its workflow file changed since it started" in text
    assert _command(cli, text, "continue on it")[:3] == ["resume", blocked, "--force"]


def test_a_reserved_run_names_the_activate_command_not_the_host(cli: Harness) -> None:
    cli.write("check", CHECK)
    run_id = cli.launch("check", {}, session="s1")
    text = _status(cli, run_id)
    assert "reserved for its session" in text and "host" not in text
    assert _command(cli, text, "start it")[:3] == ["activate", "--session", "s1"]


def test_a_run_cancelled_while_it_waited_names_a_fork_from_one_of_its_nodes(
        cli: Harness) -> None:
    cli.write("check", CHECK)
    run_id = cli.launch("check", {})
    assert cli.execute(run_id).outcome == "waiting"
    assert run_cli("cancel", run_id, "--project", str(cli.project)).returncode == 0
    text = _status(cli, run_id)
    assert "  cancelled: cancelled while waiting\n" in text and "it failed" not in text
    assert "    approve  cancelled" in text and "waiting for an answer" not in text
    assert "  its nodes: draft, approve, build\n" in text
    words = _command(cli, text, "run it again from a node")
    assert words[:4] == ["fork", run_id, "--from", "NODE"]
    forked = _paste(cli, [w.replace("NODE", "approve") for w in words])
    assert forked.returncode == 0, forked.stderr


def test_a_run_the_queue_failed_mid_step_is_told_as_failed_with_a_fork_that_works(
        cli: Harness) -> None:
    cli.write("broken", BROKEN)
    run_id = cli.launch("broken", {})
    with pytest.raises(Crash):  # the worker dies once build has started
        cli.execute(run_id, engine_hook=lambda e: crash_on(e, "node_started", node_id="build",
                                                            after=True))
    token = cli.row(run_id).claim_token
    assert token is not None
    cli.store.fail(run_id, token, "crash_loop", "the worker kept crashing")  # as a host would
    text = _status(cli, run_id)
    assert "  failed at build: the worker kept crashing [crash_loop]" in text
    assert "    build  interrupted" in text and "cancelled" not in text
    forked = _paste(cli, _command(cli, text, "run it again from there"))
    assert forked.returncode == 0, forked.stderr
    assert cli.row(forked.stdout.strip()).fork_node == "build"


MANY = """
workflow = define_workflow(
    start_at="n0",
    nodes=[compute(f"n{i}", lambda ctx: 1) for i in range(45)],
    edges=[edge(f"n{i}", f"n{i + 1}") for i in range(44)],
)
"""


def test_a_long_run_shows_its_last_steps_and_names_the_logs_of_all_of_them(
        cli: Harness) -> None:
    cli.write("many", MANY)
    run_id = cli.launch("many", {})
    assert cli.execute(run_id).outcome == "completed"
    lines = _status(cli, run_id).splitlines()
    steps = [line.split()[0] for line in lines if line.startswith("    n")]
    assert steps == [f"n{i}" for i in range(5, 45)]
    (hint,) = [line for line in lines if "earlier steps" in line]
    assert hint.startswith("    … 5 earlier steps")
    assert f"logs {run_id} --project {cli.project}`" in hint  # named from outside the project
    every = run_cli(*shlex.split(hint.split("`")[1])[1:], cwd=cli.root)
    assert every.returncode == 0 and "=== n0 (" in every.stdout


MOUNTED = """
from pi_workflows import include

def child():
    return define_workflow(
        name="child", start_at="ask",
        nodes=[checkpoint("ask"), compute("said", lambda ctx: ctx.outputs["ask"])],
        edges=[edge("ask", "said")], exits={"done": "said"})

workflow = define_workflow(
    start_at="first",
    nodes=[compute("first", lambda ctx: 1), include(child(), input={}, as_="m"),
           compute("end", lambda ctx: ctx.outputs["m.done"])],
    edges=[edge("first", "m"), edge("m.done", "end")],
)
"""
ASKER = """
workflow = define_workflow(
    start_at="ask",
    nodes=[human_decision("ask", question="Ship it?", choices=[choice("yes"), choice("no")]),
           compute("y", lambda ctx: 1), compute("n", lambda ctx: 2)],
    edges=[human_decision_edge("ask", {"yes": "y", "no": "n"})],
    exits={"shipped": "y", "held": "n"},
)
"""
OUTER = """
workflow = define_workflow(
    start_at="prep",
    nodes=[compute("prep", lambda ctx: {}), include("asker", as_="gate"),
           compute("done", lambda ctx: 1), compute("held", lambda ctx: 2)],
    edges=[edge("prep", "gate"), edge("gate.shipped", "done"), edge("gate.held", "held")],
)
"""


def test_a_continuation_inside_an_include_lists_no_include_entry_or_exit_as_carried(
        cli: Harness) -> None:
    # An include's entry and exit are no steps (the run's own list leaves them out);
    # m.done was passed by the continuation itself, so "carried" would be wrong too.
    cli.write("mounted", MOUNTED)
    parent = cli.launch("mounted")
    assert cli.execute(parent).outcome == "waiting"
    child = cli.answer(parent, "yes")
    assert cli.execute(child).outcome == "completed"
    steps = _status(cli, child).split("  steps:\n", 1)[1].split("  output:", 1)[0]
    rows = [line.split()[:2] for line in steps.splitlines()]
    assert rows == [["first", "carried"], ["m/ask", "done"], ["m/said", "done"],
                    ["end", "done"]], steps


def test_a_decision_inside_an_include_names_its_mount_and_its_continuation_carries_steps(
        cli: Harness) -> None:
    cli.write("asker", "from pi_workflows import (choice, human_decision,"
              " human_decision_edge)\n" + ASKER.lstrip())
    cli.write("outer", "from pi_workflows import include\n" + OUTER.lstrip())
    run_id = cli.launch("outer", {})
    assert cli.execute(run_id).outcome == "waiting"
    assert "waiting at gate/ask (in include gate)" in _status(cli, run_id).splitlines()[0]
    answered = cli.answer(run_id, "yes")
    assert cli.execute(answered).outcome == "completed"
    steps = _status(cli, answered).split("  steps:\n")[1].split("\n  output:")[0]
    # Only prep was done in the parent; the exit gate.shipped was passed here.
    assert [line.split()[:2] for line in steps.splitlines()] == [
        ["prep", "carried"], ["gate/ask", "done"], ["gate/y", "done"], ["done", "done"]]


def test_a_checkpoint_with_run_shows_what_it_computed_for_the_person(cli: Harness) -> None:
    cli.write("merge", """
workflow = define_workflow(
    start_at="diff",
    nodes=[compute("diff", lambda ctx: {"files": ["a.py", "b.py"]}),
           checkpoint("approve", summary="Merge these changes?",
                      run=lambda ctx: {"files": len(ctx.outputs["diff"]["files"])})],
    edges=[edge("diff", "approve")],
)
""")
    run_id = cli.launch("merge", {})
    assert cli.execute(run_id).outcome == "waiting"
    text = _status(cli, run_id)
    assert "    Merge these changes?\n    data:\n      files: 2\n" in text
    done = run_cli("status", run_id, "--json", "--project", str(cli.project), cwd=cli.root)
    assert json.loads(done.stdout)["waitingData"] == {"files": 2}
