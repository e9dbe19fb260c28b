"""Progress shown live: a shell node's output lines become updates (``parse_line``);
``run`` on a real pty draws them as a bar that advances, with the time left, while
the command runs; ``status --nodes`` gives the Pi widget the latest one (its real
``widgetLines``, loaded with Pi's TypeScript loader); ``logs`` and ``watch`` say
``3/4 (75%)``; ``parse`` made the node's output."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from .agents_kit import Terminal
from .harness import Project, wait_for

pytestmark = pytest.mark.slow  # real processes: an e2e drill

REPO = Path(__file__).resolve().parents[1]
# Each line waits for the test's `go-N`, so the test decides when the bar moves.
GATED = """
from pi_workflows import define_workflow, shell, parse_line

def line(text):
    if text.startswith("done "):
        done, total = text[5:].split("/")
        return {"progress": {"done": int(done), "total": int(total)}}
    return None

workflow = define_workflow(
    start_at="count",
    nodes=[shell("count", "for i in 1 2 3 4; do while [ ! -e go-$i ]; do sleep 0.02; done;"
                          " echo done $i/4; done",
                 updates=parse_line(line),
                 parse=lambda result, ctx: {"lines": len(result["stdout"].splitlines())})],
)
"""
WIDGET = """
const { createJiti } = require(process.env.JITI);
(async () => {
  const shown = await createJiti(__filename).import(process.env.SHOWN);
  const run = JSON.parse(require("fs").readFileSync(0, "utf8"));
  process.stdout.write(JSON.stringify(shown.widgetLines(run)));
})().catch((err) => { console.error(err); process.exit(1); });
"""
BAR = re.compile(r"\[(█*)░*\] (\d)/4 \((\d+)%\)")


def _run_id(project: Project) -> str:
    def one() -> str | None:
        runs = json.loads(project.cli("list", "--json").stdout)["runs"]
        return runs[0]["runId"] if runs else None

    return str(wait_for(one, what="the run to exist"))


def _bars(text: str) -> list[tuple[int, int]]:
    """Every bar drawn: (its filled cells, its count done), in order."""
    return [(len(fill), int(done)) for fill, done, _ in BAR.findall(text)]


def _widget(project: Project, run: str, tmp_path: Path) -> list[str]:
    node, jiti = shutil.which("node"), REPO / "node_modules" / "jiti"
    if node is None or not jiti.exists():
        pytest.skip("node and the pinned Pi's node_modules are needed")
    info = project.cli("status", run, "--nodes", "--json").stdout
    script = tmp_path / "widget.cjs"
    script.write_text(WIDGET)
    env = {"JITI": str(jiti), "SHOWN": str(REPO / "supervisor" / "piext" / "shown.ts"),
           "PATH": os.environ.get("PATH", "")}
    out = subprocess.run([node, str(script)], input=info, env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout))


@pytest.mark.timeout(180)
def test_progress_lines_draw_an_advancing_bar_on_a_pty_and_read_as_text_elsewhere(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("gated", GATED)
    project.env["TERM"] = "xterm-256color"
    term = Terminal(project, "run", "gated")
    try:
        (project.root / "go-1").touch()
        term.wait_text("1/4 (25%)")
        run = _run_id(project)
        (project.root / "go-2").touch()
        term.wait_text("2/4 (50%)")
        # Two updates: a rate so far, so the time left shows next to the bar.
        wait_for(lambda: re.search(r"2/4 \(50%\) · about \d+ (s|min)", term.text()),
                 what="the time left next to the bar")
        widget = _widget(project, run, tmp_path)
        assert any(line.startswith("  ▶ count") and "[#####-----] 2/4 (50%)" in line
                   for line in widget), widget
        (project.root / "go-3").touch()
        term.wait_text("3/4 (75%)")
        (project.root / "go-4").touch()
        assert term.proc.wait(60) == 0, term.text()
        text = term.text()
    finally:
        term.close()
    bars = _bars(text)
    dones = [done for _, done in bars]
    assert {1, 2, 3} <= set(dones), text[-2000:]
    assert dones == sorted(dones)  # it only moves forward
    fills = {done: fill for fill, done in bars}
    assert fills[1] < fills[2] < fills[3], fills  # the bar fills as it goes
    assert "✓ completed" in text and "lines" in text, text[-1500:]

    events = project.events(run)
    updates = [e["payload"]["data"] for e in events if e["type"] == "update_published"]
    assert updates[-1] == {"progress": {"done": 4, "total": 4}}
    assert project.state(run)["outputs"]["count"] == {"lines": 4}

    logs = project.cli("logs", run).stdout
    assert "progress: 4 updates, the last: 4/4 (100%)" in logs, logs
    watched = project.cli("watch", run).stdout.splitlines()
    assert [line.split(" ", 2)[2] for line in watched if "count: " in line
            and "(step" not in line and "effect" not in line][:4] == [
        "count: 1/4 (25%)", "count: 2/4 (50%)", "count: 3/4 (75%)", "count: 4/4 (100%)"]


@pytest.mark.timeout(180)
def test_a_kill9_mid_step_keeps_the_recorded_updates_and_the_rerun_appends(
        project: Project) -> None:
    """The worker is killed -9 while its shell step waits between progress lines; the
    host resumes the run, the (idempotent) command runs again, and its attempt's
    updates follow the ones recorded before the kill, which are all still there."""
    project.write_workflow("gated", GATED.replace(
        "updates=parse_line(line),", "updates=parse_line(line), idempotent=True,"))
    project.start_host()
    run = project.detach("gated")
    for gate in ("go-1", "go-2"):
        (project.root / gate).touch()

    def updates() -> list[dict[str, object]]:
        return [e for e in project.events(run) if e["type"] == "update_published"]

    wait_for(lambda: len(updates()) == 2, what="two updates before the kill")
    before = updates()
    worker = next(p["pid"] for p in project.state_processes(run) if p["role"] == "worker")
    os.kill(worker, signal.SIGKILL)
    wait_for(lambda: any(e["type"] == "run_resumed" for e in project.events(run)),
             timeout=60, what="the host to resume the run", diag=lambda: project.diagnose([run]))
    wait_for(lambda: len(updates()) > 2 and updates()[-1]["payload"]["data"]["progress"][
        "done"] == 2, timeout=60, what="the rerun to reach the second line again")
    for gate in ("go-3", "go-4"):
        (project.root / gate).touch()
    wait_for(lambda: project.row(run).state == "done", timeout=60, what="the run to finish",
             diag=lambda: project.diagnose([run]))
    events = project.events(run)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    after = updates()
    assert after[:2] == before  # what was recorded before the kill stays as it was
    rerun = after[2:]
    assert {e["attemptId"] for e in rerun} != {e["attemptId"] for e in before}
    assert len({e["attemptId"] for e in rerun}) == 1
    dones = [e["payload"]["data"]["progress"]["done"] for e in rerun]
    assert dones == sorted(dones) and dones[-1] == 4
    assert project.state(run)["outputs"]["count"] == {"lines": 4}
