"""A run's title and its running node's status detail in every view: ``status`` and
``list`` (human, and ``--json`` on the fast path and the typer app alike), ``watch``, the
live view, ``sync`` and the Pi footer (issue 23, item 2)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pi_workflows.supervisor.session.sync import _change, run_line
from pi_workflows.supervisor.views.follower import TraceFollower
from pi_workflows.supervisor.views.watch import watch
from rich.console import Console

from tests.helpers.cli import CliResult, run_cli
from tests.helpers.engine import GATES, Harness

pytestmark = pytest.mark.timeout(60)
REPO = Path(__file__).resolve().parents[3]
ESC = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

FLOW = """
def slow(ctx):
    h.GATES["inside"].set()
    h.GATES["hold"].wait(30)
    return {"built": True}

workflow = define_workflow(
    input=lambda raw: {"issue": str(raw.get("task") or "nothing")},
    title=lambda value: "Fix " + value["issue"],
    start_at="fetch",
    nodes=[compute("fetch", lambda ctx: 1),
           compute("build", slow, status_detail=lambda ctx: f"step {ctx.state.steps} of 3"),
           compute("tell", lambda ctx: "done")],
    edges=[edge("fetch", "build"), edge("build", "tell")],
)
"""


@pytest.fixture
def running(cli: Harness) -> Iterator[tuple[Harness, str]]:
    """A titled run held inside its ``build`` node."""
    cli.write("fix", FLOW)
    GATES.update(inside=threading.Event(), hold=threading.Event())
    run_id = cli.launch("fix", {"task": "the login page"})
    box: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: box.setdefault("out", cli.execute(run_id)))
    worker.start()
    assert GATES["inside"].wait(20)
    try:
        yield cli, run_id
    finally:
        GATES["hold"].set()
        worker.join(30)
    assert box["out"].outcome == "completed"


def _cli(h: Harness, *args: str, fast: bool = True) -> CliResult:
    extra = {"COLUMNS": "200"} if fast else {"COLUMNS": "200", "PI_WORKFLOWS_NO_FAST_CLI": "1"}
    done = run_cli(*args, "--project", str(h.project), env={**os.environ, **extra}, cwd=h.root)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done


def _both(h: Harness, *args: str) -> Any:
    fast, full = _cli(h, *args), _cli(h, *args, fast=False)
    assert fast.stdout == full.stdout, args
    return json.loads(fast.stdout)


def test_status_and_list_json_carry_the_title_and_detail_on_both_paths(
        running: tuple[Harness, str]) -> None:
    h, run_id = running
    info = _both(h, "status", run_id, "--json")
    assert info["title"] == "Fix the login page"
    assert (info["currentNode"], info["statusDetail"]) == ("build", "step 2 of 3")
    [listed] = _both(h, "list", "--json")["runs"]
    assert listed["title"] == "Fix the login page" and listed["statusDetail"] == "step 2 of 3"
    [unfinished] = _both(h, "status", "--json")["runs"]
    assert unfinished["title"] == "Fix the login page"


def test_status_and_list_show_the_title_and_the_running_node_detail(
        running: tuple[Harness, str]) -> None:
    h, run_id = running
    status = _cli(h, "status", run_id).stdout
    head = status.splitlines()[0]
    assert head.startswith(f'{run_id}  fix  "Fix the login page"  running at build: step 2')
    assert "  running at build: step 2 of 3" in status.splitlines()
    listing = _cli(h, "list").stdout.splitlines()
    assert '"Fix the login page" at build: step 2 of 3' in listing[1]


def test_once_the_node_is_over_its_detail_is_gone_and_the_title_stays(cli: Harness) -> None:
    cli.write("fix", FLOW)
    GATES.update(inside=threading.Event(), hold=threading.Event())
    GATES["hold"].set()
    run_id = cli.launch("fix", {"task": "the login page"})
    assert cli.execute(run_id).outcome == "completed"
    info = _both(cli, "status", run_id, "--json")
    assert info["title"] == "Fix the login page" and info["statusDetail"] is None
    assert "step 2" not in _cli(cli, "status", run_id).stdout


def test_an_untitled_run_reads_as_before(cli: Harness) -> None:
    cli.write("plain", """
        workflow = define_workflow(start_at="a", nodes=[compute("a", lambda ctx: 1)])
    """)
    run_id = cli.launch("plain")
    assert cli.execute(run_id).outcome == "completed"
    info = _both(cli, "status", run_id, "--json")
    assert info["title"] is None and info["statusDetail"] is None
    assert _cli(cli, "status", run_id).stdout.splitlines()[0].startswith(
        f"{run_id}  plain  completed")
    assert '"' not in _cli(cli, "list").stdout


def test_watch_names_the_title_and_each_node_detail(cli: Harness) -> None:
    cli.write("fix", FLOW)
    GATES.update(inside=threading.Event(), hold=threading.Event())
    GATES["hold"].set()
    run_id = cli.launch("fix", {"task": "the login page"})
    assert cli.execute(run_id).outcome == "completed"
    lines: list[str] = []
    assert watch(cli.store, cli.runs, run_id, echo=lines.append) == 0
    assert lines[0].endswith('run_started  "Fix the login page"')
    assert next(line for line in lines if "build: started" in line).endswith(
        "build: started (step 2): step 2 of 3")


def test_the_live_view_shows_the_title_and_the_running_node_detail(
        running: tuple[Harness, str]) -> None:
    from pi_workflows.supervisor.views.live import LiveView

    h, run_id = running
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, force_interactive=True, width=120,
                      color_system=None, highlight=False)
    view = LiveView(console=console)
    view.show(TraceFollower(h.bundle(run_id)))
    view.close()
    text = ESC.sub("", out.getvalue())
    assert f'fix  "Fix the login page"  {run_id}' in text
    build = next(line for line in text.splitlines() if " build " in line)
    assert "running" in build and build.rstrip().endswith("step 2 of 3")
    fetch = next(line for line in text.splitlines() if " fetch " in line)
    assert "step 2" not in fetch


def test_sync_names_the_title(running: tuple[Harness, str]) -> None:
    h, run_id = running
    info = _change(h.row(run_id), h.runs, False, "s1")
    assert info["title"] == "Fix the login page"
    assert run_line(info).startswith(f'{run_id}  fix  "Fix the login page"  running at build')


FOOTER = """
const { createJiti } = require(process.env.JITI);
(async () => {
  const shown = await createJiti(__filename).import(process.env.SHOWN);
  const base = { runId: "r1", workflow: "fix", queueState: "running", runStatus: "running",
                 currentNode: "build", startedAt: Date.now() - 5000 };
  console.log(JSON.stringify([
    shown.footerText({ ...base, title: "Fix the login page", statusDetail: "step 2 of 3" }),
    shown.footerText({ ...base, title: null, statusDetail: null }, " held"),
    shown.footerText({ ...base, queueState: "done", runStatus: "waiting", currentNode: null,
                       waitingOn: "ask", title: "T", statusDetail: "stale" }),
  ]));
})().catch((err) => { console.error(err); process.exit(1); });
"""


def test_the_pi_footer_shows_the_title_and_the_running_node_detail(tmp_path: Path) -> None:
    node, jiti = shutil.which("node"), REPO / "node_modules" / "jiti"
    if node is None or not jiti.exists():
        pytest.skip("node and the pinned Pi's node_modules are needed")
    script = tmp_path / "footer.cjs"
    script.write_text(FOOTER)
    env = {"JITI": str(jiti), "SHOWN": str(REPO / "supervisor" / "piext" / "shown.ts"),
           "PATH": os.environ.get("PATH", "")}
    done = subprocess.run([node, str(script)], env=env, capture_output=True, text=True,
                          timeout=50)
    assert done.returncode == 0, done.stderr
    titled, plain, waiting = json.loads(done.stdout)
    assert re.fullmatch(r'workflow fix "Fix the login page": running at build: step 2 of 3'
                        r" \(\d+s\)", titled), titled
    assert re.fullmatch(r"workflow fix: running at build \(\d+s\) held", plain), plain
    assert waiting.startswith('workflow fix "T": waiting at ask') and "stale" not in waiting
