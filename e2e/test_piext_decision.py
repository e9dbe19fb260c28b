"""A human decision answered through Pi (issue 23, item 3), in a real Pi (RPC mode, the
scripted model): the waiting report shows the question and the valid answers; an answer
that is not one of them is refused with the command line's own line, by ``/workflow
answer`` and by the model's ``workflow`` tool alike, and nothing is queued; a valid
``/workflow answer`` runs the continuation on the host, routed on the label."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from .agents_kit import tool_results
from .harness import Project, wait_for
from .pi_env import PiRpc
from .piext_kit import STEP_S, custom, extension_drill, steps, text_of, ui
from .scripted_model import Reply, Request, Text, ToolCalls, call
from .sessions_kit import query

pytestmark = pytest.mark.slow  # real processes: an e2e drill

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "approve.workflow.py"
VALID = "takes one of: publish, drop, revise TEXT (3-500 characters)"
REPORT = re.compile(r"run (\S+) \(approve\) is waiting at decision review")


def _reports(pi: PiRpc) -> list[str]:
    return [text_of(m) for m in custom(pi) if (m.get("details") or {}).get("kind") == "report"]


def _children(project: Project, run: str) -> list[str]:
    rows = query(project, "SELECT run_id FROM workflow_run_queue WHERE parent_run_id = ?",
                 (run,))
    return [str(r["run_id"]) for r in rows]


def _answer_maybe(request: Request) -> Reply:
    """The model answers the waiting run it was told about with something not offered."""
    found = REPORT.findall("\n".join(request.texts("user") + request.texts("system")))
    assert found, request.describe()
    return ToolCalls(call("workflow", {"action": "answer", "runId": found[-1],
                                       "answer": "maybe"}))


@pytest.mark.timeout(240)
def test_a_decision_is_shown_refused_and_answered_through_pi(project: Project,
                                                             tmp_path: Path) -> None:
    target = project.root / ".pi" / "workflows" / "approve.workflow.py"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(EXAMPLE, target)
    project.start_host()
    script = steps(_answer_maybe, Text("That answer was refused."))
    with extension_drill(project, script, tmp_path / "pi") as drill:
        pi = drill.open()
        assert pi.request({"type": "prompt",
                           "message": "/workflow approve fixed the login bug"})["success"]
        report = wait_for(lambda: next((r for r in _reports(pi) if REPORT.search(r)), None),
                          STEP_S, what="the waiting report", diag=pi.diagnose)
        run = REPORT.findall(report)[0]
        assert "It asks (for the release manager): Publish this release note?" in report
        assert "Answers: publish | drop | revise TEXT (3-500 characters)." in report
        assert f"/workflow answer {run} ANSWER" in report

        # The person's command: refused with the CLI's one line.
        assert pi.request({"type": "prompt",
                           "message": f"/workflow answer {run} perhaps later"})["success"]
        refused = wait_for(lambda: next((e for e in ui(pi, "notify")
                                         if VALID in str(e.get("message"))), None),
                           STEP_S, what="the refusal", diag=pi.diagnose)
        assert refused["notifyType"] == "error", refused
        assert "perhaps" not in str(refused["message"])
        # The model's tool call: refused the same way (its tool result is the error).
        assert pi.request({"type": "prompt", "message": "answer that run with maybe"})[
            "success"]
        drill.model.wait_for_requests(2, STEP_S)
        told = tool_results(drill.model.completions[1])
        assert any(VALID in t for t in told), told
        assert _children(project, run) == []  # nothing was queued by either

        assert pi.request({"type": "prompt", "message":
                           f"/workflow answer {run} revise say it more briefly"})["success"]
        note = wait_for(lambda: next((e["message"] for e in ui(pi, "notify")
                                      if "continuation" in str(e.get("message"))), None),
                        STEP_S, what="the answer's notice", diag=pi.diagnose)
        assert note.startswith(f"Answered {run} with revise; continuation "), note
        child = note.split("continuation ")[1].split(" ")[0]
        wait_for(lambda: any(f"run {child} (approve) completed" in r for r in _reports(pi)),
                 STEP_S, what="the continuation's result", diag=pi.diagnose)
        assert any("to revise: say it more briefly" in r for r in _reports(pi))
        assert _children(project, run) == [child]
        drill.check()
