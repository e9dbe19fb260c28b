"""``controller apply|get|list|delete|reconcile|events`` and ``controllers``, in process.

No host runs: what the commands write and show, their JSON, and bad input as
one line on stderr, exit 2, nothing written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pi_workflows.protocol.store import Store

from tests.helpers.cli import run_cli

pytestmark = pytest.mark.timeout(60)

SOURCE = """
from pi_workflows import define_controller
controller = define_controller(name="demo", initial_status=lambda spec: {"n": spec.get("n")},
                               reconcile=lambda ctx, r: ctx.settled())
"""


@pytest.fixture
def proj(tmp_path: Path):
    root = tmp_path / "proj"
    wf = root / ".pi" / "workflows"
    wf.mkdir(parents=True)
    (wf / "demo.controller.py").write_text(SOURCE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PI_WORKFLOWS_")}
    env.update(PI_WORKFLOWS_HOME=str(tmp_path / "home"), HOME=str(tmp_path / "home"))

    def cli(*args: str):
        return run_cli(*args, "--project", str(root), env=env)

    cli.root = root  # type: ignore[attr-defined]
    return cli


def _store_file(cli) -> Path:
    return Path(json.loads(cli("paths", "--json").stdout)["storeFile"])


def test_apply_get_list_reconcile_delete(proj):
    out = proj("controller", "apply", "demo", "k1", "--spec-json", '{"n": 3}', "--json")
    assert out.returncode == 0, out.stderr
    made = json.loads(out.stdout)
    assert made["action"] == "created" and made["status"]["controller_status"] == {"n": 3}
    again = proj("controller", "apply", "demo", "k1", "--spec-json", '{"n": 3}')
    assert again.stdout.strip() == "demo/k1: unchanged (generation 1)"
    changed = proj("controller", "apply", "demo", "k1", "--spec-json", '{"n": 4}')
    assert changed.stdout.strip() == "demo/k1: updated (generation 2)"
    got = json.loads(proj("controller", "get", "demo", "k1", "--json").stdout)
    assert got["metadata"]["generation"] == 2 and got["spec"] == {"n": 4}
    assert [e["type"] for e in got["events"]][:2] == ["applied", "spec_changed"]
    assert got["ready"]["status"] == "unknown"
    listed = proj("controller", "list").stdout
    assert listed.startswith("demo/k1  Ready=unknown  Pending  generation 2")
    assert json.loads(proj("controller", "reconcile", "demo", "k1", "--json").stdout)[
        "queued"] in ("kept", "sooner", "added")
    events = proj("controller", "events", "demo", "k1", "--json").stdout.splitlines()
    assert json.loads(events[0])["type"] == "applied"
    gone = json.loads(proj("controller", "delete", "demo", "k1", "--json").stdout)
    assert gone["deleted"] is True  # no finalizer yet: no controller reconciled it
    assert proj("controller", "get", "demo", "k1").returncode == 2
    # Its events outlive it (until gc): the deletion is explained, not "no resource".
    after = proj("controller", "events", "demo", "k1")
    assert after.returncode == 0, after.stderr
    assert after.stdout.splitlines()[-1].split()[1] == "deleted"
    never = proj("controller", "events", "demo", "k2")
    assert never.returncode == 2 and "no resource k2" in never.stderr


def test_apply_from_a_spec_file(proj, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text('{"n": 1}')
    out = proj("controller", "apply", "demo", "k", "--spec-file", str(spec))
    assert out.returncode == 0 and "created" in out.stdout


@pytest.mark.parametrize(("args", "words"), [
    (("controller", "apply", "nope", "k", "--spec-json", "{}"), "no controller named 'nope'"),
    (("controller", "apply", "demo", "k", "--spec-json", "{"), "--spec-json is not valid JSON"),
    (("controller", "apply", "demo", "k", "--spec-json", "[1]"),
     "--spec-json must be a JSON object ({...}), not list"),
    (("controller", "apply", "demo", "k", "--spec-json", "null"),
     "--spec-json must be a JSON object ({...}), not null"),
    (("controller", "apply", "demo", "Bad Key", "--spec-json", "{}"), "contains whitespace"),
    (("controller", "apply", "demo", "k"), "exactly one of --spec-json or --spec-file"),
    (("controller", "apply", "demo", "k", "--spec-json", "{}", "--spec-file", "x"),
     "exactly one of"),
    (("controller", "apply", "demo", "k", "--spec-file", "/nonexistent/x"), "cannot read it"),
    (("controller", "apply", "Demo", "k", "--spec-json", "{}"), "invalid controller name"),
    (("controller", "get", "demo", "missing"), "no resources yet"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(proj, args, words):
    out = proj(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], out.stderr
    assert json.loads(proj("controller", "list", "--json").stdout)["resources"] == []


def test_a_broken_controller_file_is_listed_and_refuses_apply(proj):
    (proj.root / ".pi" / "workflows" / "bad.controller.py").write_text("raise SystemExit(3)\n")
    out = json.loads(proj("controllers", "--json").stdout)
    assert [c["name"] for c in out["controllers"]] == ["demo"]
    assert out["errors"][0]["name"] == "bad" and "SystemExit" in out["errors"][0]["error"]
    refused = proj("controller", "apply", "bad", "k", "--spec-json", "{}")
    assert refused.returncode == 2 and "import failed" in refused.stderr


def test_initial_status_that_raises_refuses_apply(proj):
    (proj.root / ".pi" / "workflows" / "strict.controller.py").write_text(
        "from pi_workflows import define_controller\n"
        "def initial(spec):\n    raise ValueError('no n')\n"
        "controller = define_controller(name='strict', initial_status=initial,"
        " reconcile=lambda ctx, r: ctx.settled())\n")
    out = proj("controller", "apply", "strict", "k", "--spec-json", "{}")
    assert out.returncode == 2 and "initial_status(spec) failed" in out.stderr


def test_store_is_real(proj):
    proj("controller", "apply", "demo", "k", "--spec-json", "{}")
    with Store(_store_file(proj)) as store:
        assert store.get_resource("demo", "k") is not None


def test_a_sessions_status_counts_the_resources_not_ready_for_the_pi_footer(proj):
    def count() -> int:
        out = proj("status", "--session", "pi-1", "--nodes", "--json")
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["controllersNotReady"]

    proj("controller", "apply", "demo", "a", "--spec-json", "{}")
    proj("controller", "apply", "demo", "b", "--spec-json", "{}")
    assert count() == 2
    with Store(_store_file(proj)) as store:
        res = store.get_resource("demo", "a")
        assert res is not None
        store.write_status("demo", "a", res.resource_version, {"conditions": [
            {"type": "Ready", "status": "true", "reason": "Done", "message": ""}]})
    assert count() == 1
    proj("controller", "delete", "demo", "b")
    assert count() == 0
