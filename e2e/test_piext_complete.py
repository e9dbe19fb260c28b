"""The ``/workflow`` and ``/controller`` commands' argument completion. RPC mode has no completion
request, so this loads the extension with Pi's own TypeScript loader (``jiti``, from
the pinned Pi's node_modules) into a stand-in of the extension API and asks
``getArgumentCompletions`` directly; the completions come from the real
``pi-workflows`` CLI on a real project."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .harness import Project
from .piext_kit import BIN, extension_path
from .sessions_kit import FLOW

pytestmark = pytest.mark.slow  # real processes: node and the CLI

REPO = Path(__file__).resolve().parents[1]
ASK = """
const { createJiti } = require(process.env.JITI);
(async () => {
  const mod = await createJiti(__filename).import(process.env.EXTENSION);
  const on = {};
  const commands = {};
  mod.default({ registerTool() {}, registerCommand(n, c) { commands[n] = c; },
                on(e, h) { on[e] = h; }, sendMessage() {} });
  const ctx = { cwd: process.env.PROJECT, isIdle: () => false, hasPendingMessages: () => false,
    sessionManager: { getSessionId: () => "complete-1", getBranch: () => [] },
    ui: { setStatus() {}, setWidget() {}, notify() {} } };
  await on.session_start({}, ctx);
  const out = {};
  const command = commands[process.env.COMMAND || "workflow"];
  for (const prefix of JSON.parse(process.env.PREFIXES))
    out[prefix] = await command.getArgumentCompletions(prefix);
  await on.session_shutdown({}, ctx);
  process.stdout.write(JSON.stringify(out));
  process.exit(0);
})().catch((e) => { process.stderr.write(String(e)); process.exit(1); });
"""


def _ask(project: Project, tmp_path: Path, node: str, jiti: Path, command: str,
         prefixes: list[str]) -> dict:
    """Each prefix's completions from the loaded extension's COMMAND."""
    script = tmp_path / "ask.cjs"
    script.write_text(ASK)
    env = {**project.env, "JITI": str(jiti), "EXTENSION": str(extension_path()),
           "PROJECT": str(project.root), "PI_WORKFLOWS_BIN": str(BIN), "COMMAND": command,
           "PREFIXES": json.dumps(prefixes), "PATH": os.environ.get("PATH", "")}
    out = subprocess.run([node, str(script)], env=env, cwd=project.root, capture_output=True,
                         text=True, timeout=90)
    assert out.returncode == 0, out.stderr
    found: dict = json.loads(out.stdout)
    return found


@pytest.mark.timeout(120)
def test_workflow_names_subcommands_and_run_ids_complete(project: Project,
                                                         tmp_path: Path) -> None:
    node = shutil.which("node")
    jiti = REPO / "node_modules" / "jiti"
    if node is None or not jiti.exists():
        pytest.skip("node and the pinned Pi's node_modules are needed")
    project.write_workflow("flow", FLOW)
    waiting = project.cli("run", "flow", "ask", "--json", check=False)
    assert waiting.returncode == 3, waiting.stderr
    run = json.loads(waiting.stdout)["runId"]
    found = _ask(project, tmp_path, node, jiti, "workflow",
                 ["", "fl", "st", f"answer {run[-8:]}", "nope", "resume", "flow"])
    values = {prefix: [i["value"] for i in items or []] for prefix, items in found.items()}
    assert "flow " in values[""] and "status " in values[""] and "answer " in values[""]
    assert values["fl"] == ["flow "]
    assert values["st"] == ["status "]
    assert values[f"answer {run[-8:]}"] == [f"answer {run} "]
    assert found["nope"] is None
    # A word typed in full is not offered again, so Enter runs `/workflow resume`.
    assert found["resume"] is None and found["flow"] is None


@pytest.mark.timeout(120)
def test_controller_verbs_names_and_keys_complete(project: Project, tmp_path: Path) -> None:
    node = shutil.which("node")
    jiti = REPO / "node_modules" / "jiti"
    if node is None or not jiti.exists():
        pytest.skip("node and the pinned Pi's node_modules are needed")
    folder = project.root / ".pi" / "workflows"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gate.controller.py").write_text(
        "from pi_workflows import define_controller\n"
        "controller = define_controller(name='gate', initial_status=lambda spec: {},"
        " reconcile=lambda ctx, r: ctx.settled())\n")
    project.cli("controller", "apply", "gate", "alpha", "--spec-json", "{}")
    project.cli("controller", "apply", "gate", "beta", "--spec-json", "{}")
    found = _ask(project, tmp_path, node, jiti, "controller",
                 ["", "re", "get g", "get gate a", "list", "apply gate"])
    values = {prefix: [i["value"] for i in items or []] for prefix, items in found.items()}
    assert values[""] == ["list ", "get ", "apply ", "reconcile ", "delete "]
    assert values["re"] == ["reconcile "]
    assert values["get g"] == ["get gate "]
    assert values["get gate a"] == ["get gate alpha "]
    assert found["list"] is None and found["apply gate"] is None  # typed in full
