"""``/controller`` in a real Pi (RPC mode, the extension loaded): apply, list, get,
reconcile and delete through the CLI, bad specs refused before anything runs, the
CLI's one-line errors shown, and the footer's count of resources not ready, which
appears with an unreconciled resource and clears once a host has settled it Ready."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .harness import Project, wait_for
from .pi_env import PiRpc
from .piext_kit import STEP_S, extension_drill, steps, ui
from .scripted_model import Text
from .snippets import GATE_CONTROLLER

pytestmark = pytest.mark.slow  # real processes: an e2e drill


KEY = "pi-workflows-controllers"


def _command(pi: PiRpc, line: str, needle: str, level: str | None = None) -> str:
    """Send ``/controller ...`` and wait for the notice that contains ``needle``."""
    seen = len(ui(pi, "notify"))
    assert pi.request({"type": "prompt", "message": line})["success"]

    def found() -> str | None:
        for e in ui(pi, "notify")[seen:]:
            if needle in str(e.get("message")) and (level is None or e.get("notifyType") == level):
                return str(e["message"])
        return None

    got: str = wait_for(found, STEP_S, what=f"a notice with {needle!r} for {line!r}",
                        diag=pi.diagnose)
    return got


def _footer(pi: PiRpc) -> list[str | None]:
    return [e.get("statusText") for e in ui(pi, "setStatus") if e.get("statusKey") == KEY]


def _resources(project: Project) -> dict[str, dict]:
    out = project.cli("controller", "list", "--json")
    return {r["key"]: r for r in json.loads(out.stdout)["resources"]}


@pytest.mark.timeout(240)
def test_controller_command_and_the_footers_not_ready_count(project: Project,
                                                            tmp_path: Path) -> None:
    folder = project.root / ".pi" / "workflows"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gate.controller.py").write_text(GATE_CONTROLLER)
    with extension_drill(project, steps(Text("ok")), tmp_path / "pi") as drill:
        pi = drill.open()
        usage = _command(pi, "/controller", "/controller [list", "warning")
        assert "apply NAME KEY JSON" in usage

        made = _command(pi, '/controller apply gate k1 {"n": 1, "note": "two  spaces"}',
                        "gate/k1")
        assert made == "gate/k1: created (generation 1)"
        assert _resources(project)["k1"]["spec"] == {"n": 1, "note": "two  spaces"}
        # No host runs: it stays not ready, and the footer counts it.
        wait_for(lambda: "controllers: 1 not ready (/controller list)" in _footer(pi),
                 STEP_S, what="the footer's not-ready count", diag=pi.diagnose)

        # Refused before anything runs, and nothing written.
        assert "must be a JSON object" in _command(
            pi, "/controller apply gate k2 [1]", "spec", "error")
        assert "not valid JSON" in _command(pi, "/controller apply gate k2 {bad", "spec",
                                            "error")
        assert "needs the spec" in _command(pi, "/controller apply gate k2", "spec", "error")
        # The CLI's own one-line errors.
        assert _command(pi, "/controller apply nosuch k {}", "nosuch", "error").startswith(
            "no controller named 'nosuch'")
        assert "no resource k9" in _command(pi, "/controller get gate k9", "k9", "error")
        assert set(_resources(project)) == {"k1"}

        listed = _command(pi, "/controller list", "gate/k1")
        assert listed.startswith("gate/k1  Ready=unknown"), listed
        got = _command(pi, "/controller get gate k1", "spec:")
        assert 'spec: {"n": 1, "note": "two  spaces"}' in got
        assert "queued" in _command(pi, "/controller reconcile gate k1", "gate/k1")
        # A spec past 100 KB goes through a private file (--spec-file), not the argv.
        blob = "x" * 120_000
        assert _command(pi, f'/controller apply gate big {{"blob": "{blob}"}}',
                        "gate/big") == "gate/big: created (generation 1)"
        assert _resources(project)["big"]["spec"] == {"blob": blob}

        # A host settles it Ready: the count goes, the footer is cleared.
        project.start_host()
        wait_for(lambda: _resources(project)["k1"]["ready"]["status"] == "true", STEP_S,
                 what="k1 Ready")
        marked = len(_footer(pi))
        listed = _command(pi, "/controller list gate", "Ready=true").splitlines()
        assert any(line.startswith("gate/k1  Ready=true") for line in listed), listed
        wait_for(lambda: None in _footer(pi)[marked - 1:] and _footer(pi)[-1] is None, STEP_S,
                 what="the footer's count cleared", diag=pi.diagnose)

        assert "gate/k1" in _command(pi, "/controller delete gate k1", "gate/k1")
        wait_for(lambda: "k1" not in _resources(project), STEP_S, what="k1 deleted")
