"""What a person sees of a run: the live view on a real pty, `watch --json`, `logs`."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess

import pytest

from tests.helpers.processes import reap

from .agents_kit import Terminal
from .harness import HarnessError, LineReader, Project, wait_for
from .sessions_kit import Children, cli_argv

pytestmark = pytest.mark.slow  # real processes: an e2e drill

# The shell step prints a line, then waits for the test to create `go`.
VIEWED = """
from pi_workflows import define_workflow, shell, notify, checkpoint, edge

workflow = define_workflow(
    start_at="build",
    nodes=[shell("build", "echo 'building: step one'; while [ ! -e go ]; do sleep 0.02; done;"
                          " echo 'building: all done'"),
           notify("tell", "the build is ready for review"),
           checkpoint("ask", summary="ship it?")],
    edges=[edge("build", "tell"), edge("tell", "ask")],
)
"""

TWO = """
from pi_workflows import define_workflow, shell, edge

workflow = define_workflow(
    start_at="one",
    nodes=[shell("one", "echo first says hi"),
           shell("two", "echo second before; while [ ! -e release ]; do sleep 0.02; done;"
                        " echo second after >&2")],
    edges=[edge("one", "two")],
)
"""

PLAIN = re.compile(r"^\d\d:\d\d:\d\d #\d+ ")


def _run_id(project: Project) -> str:
    def one() -> str | None:
        runs = json.loads(project.cli("list", "--json").stdout)["runs"]
        return runs[0]["runId"] if runs else None

    return str(wait_for(one, what="the run to exist"))


def _to_the_end(reader: LineReader) -> list[str]:
    """Every line the child printed, once it has exited."""
    with contextlib.suppress(HarnessError):  # the end of its output
        while True:
            reader.next(30, what="the end of the output")
    return reader.seen


def _build_finished(project: Project, run: str) -> bool:
    return any(e["type"] == "node_finished" and e.get("nodeId") == "build"
               for e in project.events(run))


@pytest.mark.timeout(120)
def test_the_live_view_ticks_streams_shell_output_and_ends_with_the_next_command(
        project: Project) -> None:
    project.write_workflow("viewed", VIEWED)
    project.env["TERM"] = "xterm-256color"  # whatever terminal the suite runs under
    term = Terminal(project, "run", "viewed")
    try:
        term.wait_text("building: step one")  # streamed while the step still runs
        run = _run_id(project)
        assert not _build_finished(project, run) and not (project.root / "go").exists()
        ticks: set[str] = set()

        def two_elapsed_values() -> bool:
            ticks.update(re.findall(r"● build\s+running\s+(\d+\.\d) s", term.text()))
            return len(ticks) >= 2

        wait_for(two_elapsed_values, what="the build's elapsed time to tick")
        assert not _build_finished(project, run)
        (project.root / "go").touch()
        assert term.proc.wait(60) == 3, term.text()
        text = term.text()
    finally:
        term.close()
    assert "building: all done" not in text.split("building: step one")[0]
    assert "» the build is ready for review" in text
    assert '"message"' not in text and '{"kind"' not in text
    assert "? waiting for an answer at ask" in text and "ship it?" in text
    assert f'answer it: pi-workflows answer {run} "your answer" --project {project.root}' \
        in text


@pytest.mark.timeout(90)
def test_without_a_terminal_the_run_prints_the_plain_lines_as_before(project: Project) -> None:
    project.write_workflow("viewed", VIEWED)
    (project.root / "go").touch()
    done = project.cli("run", "viewed", check=False)
    assert done.returncode == 3, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("run ") and lines[0].endswith("; Ctrl-C parks it for a host")
    assert all(PLAIN.match(line) for line in lines[1:]), lines
    assert lines[-1].endswith("waiting at ask: ship it?")
    assert "\x1b" not in done.stdout and "pi-workflows answer" not in done.stdout
    assert not any("building: step one" in line and "stdout" not in line for line in lines)


@pytest.mark.timeout(120)
def test_watch_json_streams_every_trace_event_once_in_order_until_the_run_settles(
        project: Project, children: Children) -> None:
    project.write_workflow("viewed", VIEWED)
    children.start("attached", "run", "viewed")
    run = _run_id(project)
    watcher, reader = children.piped("watch", run, "--json")
    while True:
        event = json.loads(reader.next(60, what="a trace event"))
        if event["type"] == "node_started" and event["nodeId"] == "build":
            break
    (project.root / "go").touch()
    assert watcher.wait(60) == 3
    events = [json.loads(line) for line in _to_the_end(reader)]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["type"] == "run_waiting"
    assert events == project.events(run)


@pytest.mark.timeout(120)
def test_logs_show_each_step_in_order_filter_by_node_and_follow_a_running_run(
        project: Project, children: Children) -> None:
    project.write_workflow("two", TWO)
    attached = children.start("attached", "run", "two")
    run = _run_id(project)
    follow = subprocess.Popen(cli_argv(project, "logs", run, "--follow"), env=project.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert follow.stdout is not None
        reader = LineReader(follow.stdout)
        while "second before" not in reader.next(60, what="the running step's output"):
            pass
        assert project.row(run).state == "running" and follow.poll() is None
        project.release()
        assert attached.wait(60) == 0
        assert follow.wait(60) == 0, follow.stderr.read() if follow.stderr else ""
        followed = "".join(_to_the_end(reader))
    finally:
        reap(follow)
    assert followed.index("=== one (step 1") < followed.index("first says hi") \
        < followed.index("=== two (step 2") < followed.index("second before") \
        < followed.index("second after")
    assert re.search(r"=== two \(step 2, attempt two-2-\w+\): done in \d", followed)

    full = project.cli("logs", run).stdout
    assert re.fullmatch(
        r"=== one \(step 1, attempt one-1-\w+\): done in \d+\.\d s ===\n"
        r"first says hi\n"
        r"=== two \(step 2, attempt two-2-\w+\): done in [^=]+ ===\n"
        r"second before\n--- stderr ---\nsecond after\n", full), full
    only = project.cli("logs", run, "two").stdout
    assert "first says hi" not in only and only.startswith("=== two (")
    steps = json.loads(project.cli("logs", run, "--json").stdout)["steps"]
    assert [(s["nodeId"], s["stdout"], s["outcome"]) for s in steps] == [
        ("one", "first says hi\n", "ok"), ("two", "second before\n", "ok")]

    unknown = project.cli("logs", "nosuchrun", check=False)
    assert unknown.returncode == 2 and unknown.stdout == ""
    [line] = unknown.stderr.strip().splitlines()
    assert line.startswith("pi-workflows: error: no run nosuchrun in project ")
    assert f"`pi-workflows list --project {project.root}`" in line  # pasted from here, it works
    bad_node = project.cli("logs", run, "three", check=False)
    assert bad_node.returncode == 2 and "has no node 'three'" in bad_node.stderr
