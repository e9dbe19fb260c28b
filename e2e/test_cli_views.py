"""The CLI's views through real processes: short run ids, list filters, chains of answers."""

from __future__ import annotations

import json
import subprocess

import pytest

from .harness import Project, wait_for
from .snippets import ONE_NODE, REVIEW

pytestmark = pytest.mark.slow  # real processes: an e2e drill


def _one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def _hex(run_id: str) -> str:
    return run_id.rsplit("-", 1)[1]


@pytest.mark.timeout(180)
def test_short_ids_filters_and_a_chain_read_as_one_run(project: Project) -> None:
    project.write_workflow("review", REVIEW)
    project.write_workflow("quick", ONE_NODE)
    human: list[str] = []  # every human output, checked for Python's None at the end

    def show(*args: str) -> str:
        out = project.cli(*args).stdout
        human.append(out)
        return out

    assert project.cli("run", "review", "the", "docs", check=False).returncode == 3
    parent = json.loads(project.cli("list", "--json").stdout)["runs"][0]["runId"]
    assert project.cli("run", "quick", check=False).returncode == 0
    queued = project.detach("quick")
    runs = json.loads(project.cli("list", "--json").stdout)["runs"]
    assert runs[0]["runId"] == queued and runs[-1]["runId"] == parent  # newest first
    done = runs[1]["runId"]

    # --state takes the words the views print: a run status as well as a queue state.
    waiting = show("list", "--state", "waiting").splitlines()
    assert len(waiting) == 2 and waiting[0].split()[:3] == ["RUN", "WORKFLOW", "STATE"]
    assert waiting[1].split()[:3] == [parent, "review", "waiting"]
    assert waiting[1].rstrip().endswith("at approve")
    assert [r["runId"] for r in json.loads(project.cli(
        "list", "--state", "done", "--json").stdout)["runs"]] == [done, parent]
    assert [r["runId"] for r in json.loads(project.cli(
        "list", "--workflow", "quick", "--limit", "1", "--json").stdout)["runs"]] == [queued]
    assert len(show("list", "--since", "1h").splitlines()) == 1 + 3  # the header, 3 runs
    bad = _one_line_error(project.cli("list", "--state", "wating", check=False))
    assert "unknown state 'wating'" in bad and "waiting" in bad and "parked" in bad

    # A run is named by its trailing hex part or any unique prefix, in every command.
    assert show("status", _hex(parent)).startswith(f"{parent}  review  waiting at approve")
    assert show("status", parent[:-3]).startswith(parent)
    ambiguous = _one_line_error(project.cli("status", "2", check=False))
    assert "ambiguous" in ambiguous and parent in ambiguous and queued in ambiguous
    missing = _one_line_error(project.cli("status", "feedf00d", check=False))
    assert str(project.root) in missing and "pi-workflows list" in missing
    refused = _one_line_error(project.cli("resume", _hex(done), check=False))
    assert f"run {done} is done" in refused
    assert f"run {done} has no Pi conversation" in _one_line_error(
        project.cli("export", _hex(done), check=False))
    assert show("cancel", _hex(queued)) == f"{queued}: cancelled\n"
    assert project.cli("watch", _hex(done), check=False).returncode == 0

    # The answer continues the run: status and list show the chain.
    child = project.cli("answer", _hex(parent), "ship", "it").stdout.strip()
    project.start_host()
    wait_for(lambda: project.row(child).state == "done", what="the continuation done",
             diag=lambda: project.diagnose([parent, child]))
    lines = show("status", _hex(parent)).splitlines()
    assert lines[0].startswith(f"{parent}  review  answered -> {child}  (")
    assert lines[1].startswith("  started ") and "took" in lines[1]
    assert lines[2:5] == ["  chain of 2 runs (one logical run):",
                          f"    1. {parent}  answered  <- this run",
                          f"    2. {child}  completed"]
    assert lines[-1].startswith(f"  answered: the chain goes on as {child} (completed)")
    lines = show("status", _hex(child)).splitlines()
    assert lines[0].startswith(f"{child}  review  completed  (") and "took" in lines[0]
    assert lines[3:5] == [f"    1. {parent}  answered", f"    2. {child}  completed  <- this run"]
    assert "  output:" in lines and f"every step's output: pi-workflows logs {child}" in lines[-1]
    info = json.loads(project.cli("status", child, "--json").stdout)
    assert info["parentRunId"] == parent and info["continuedBy"] is None
    assert [(m["runId"], m["state"]) for m in info["chain"]] == [
        (parent, "answered"), (child, "completed")]
    assert json.loads(project.cli("status", parent, "--json").stdout)["continuedBy"] == child
    listing = show("list").splitlines()
    at = next(i for i, line in enumerate(listing) if line.startswith(parent))
    assert listing[at].split()[:3] == [parent, "review", "answered"]
    assert listing[at + 1].startswith(f"  -> {child}  ")
    assert listing[at + 1].split()[2:4] == ["review", "completed"]
    assert show("list", "--state", "answered").splitlines()[1].startswith(parent)
    assert project.cli("list", "--state", "waiting").stdout == (
        "no runs match (--state waiting)\n")

    again = _one_line_error(project.cli("answer", _hex(parent), "no", check=False))
    assert f"run {parent} was already answered: its continuation is {child}" in again

    assert not [out for out in human if "None" in out], human
