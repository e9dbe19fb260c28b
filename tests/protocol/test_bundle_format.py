"""The bundle on disk: artifacts, modes, run ids, trace scanning, fsync policy, readers."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from pi_workflows import compute, define_workflow, definition_digest, edge
from pi_workflows.protocol.bundle import Bundle, BundleCorrupt, list_bundles, scan_trace
from pi_workflows.protocol.bundlewriter import BOUNDARY_EVENTS, BundleWriter
from pi_workflows.protocol.definitions.discovery import discover
from pi_workflows.protocol.errors import LimitError, UsageError
from pi_workflows.protocol.jsonenc import compact_json
from pi_workflows.protocol.limits import validate_run_id
from pi_workflows.protocol.runid import new_run_id
from pi_workflows.protocol.store import Store
from pi_workflows.supervisor.session.launch import prepare_run
from pi_workflows.worker.control import Control

from tests.helpers.engine import SOURCE, Direct, Harness, assert_well_formed

pytestmark = pytest.mark.timeout(60)

RUN_ID_FORMAT = re.compile(r"^\d{8}T\d{6}Z-[a-z0-9-]+-[0-9a-f]{8}$")
BIG = """
workflow = define_workflow(
    start_at="big",
    nodes=[compute("big", lambda ctx: {"text": ctx.input["text"], "again": ctx.input["text"],
                                       "small": "s"}),
           compute("echo", lambda ctx: ctx.outputs["big"]["text"])],
    edges=[edge("big", "echo")],
)
"""


@pytest.mark.parametrize(("text", "stored_apart"), [
    ("x" * 4096, False),  # exactly 4 KiB stays inline
    ("x" * 4097, True),
    ("é" * 2049, True),  # 4098 bytes of UTF-8 in 2049 characters
    ("🙂" * 1100 + "\n\"quoted\"", True),
])
def test_long_strings_go_to_content_addressed_artifacts(h: Harness, text: str,
                                                        stored_apart: bool) -> None:
    h.write("big", BIG)
    run_id = h.launch("big", {"text": text})
    assert h.execute(run_id).outcome == "completed"
    bundle = h.bundle(run_id)
    state = bundle.state()
    assert state["outputs"]["big"] == {"text": text, "again": text, "small": "s"}
    assert state["finalOutput"] == text
    assert state["input"] == {"text": text}
    raw = bundle.raw_state()
    files = sorted(p.name for p in bundle.artifacts.path.iterdir())
    trace = bundle.trace_path.read_text()
    if not stored_apart:
        assert raw["outputs"]["big"]["text"] == text and files == []
        return
    digest = hashlib.sha256(text.encode()).hexdigest()
    ref = {"$artifact": f"sha256:{digest}", "bytes": len(text.encode())}
    assert raw["outputs"]["big"] == {"text": ref, "again": ref, "small": "s"}
    assert raw["finalOutput"] == ref
    assert files == [digest]  # stored once, however often it appears
    assert (bundle.artifacts.path / digest).read_bytes() == text.encode()
    assert text not in trace and json.dumps(text) not in trace
    finished = [e for e in assert_well_formed(bundle) if e["type"] == "node_finished"]
    assert finished[0]["payload"]["output"]["text"] == ref


def test_trace_lines_keep_non_ascii_text_readable(h: Harness) -> None:
    # Trace lines are for people reading trace.ndjson; only hashes use the
    # ASCII-escaped canonical encoding.
    h.write("big", BIG)
    text = "café ✓ 🙂"
    run_id = h.launch("big", {"text": text})
    assert h.execute(run_id).outcome == "completed"
    raw = h.bundle(run_id).trace_path.read_bytes()
    assert text.encode() in raw
    assert b"\\u00e9" not in raw and b"\\ud83d" not in raw
    for line in raw.decode().splitlines():
        assert line == compact_json(json.loads(line))  # sorted keys, no spaces


def test_bundle_directories_are_0700_and_files_0600(h: Harness) -> None:
    h.write("big", BIG)
    run_id = h.launch("big", {"text": "y" * 5000})
    assert h.execute(run_id).outcome == "completed"
    bundle = h.bundle(run_id)
    assert stat.S_IMODE(h.runs.stat().st_mode) == 0o700
    seen = {"dir": 0, "file": 0}
    for path in [bundle.dir, *bundle.dir.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        if path.is_dir():
            assert mode == 0o700, path
            seen["dir"] += 1
        else:
            assert mode == 0o600, path
            seen["file"] += 1
    assert seen["dir"] >= 3  # the bundle, session/, artifacts/
    assert seen["file"] >= 5  # manifest, workflow, state, trace, one artifact (+ lock)
    names = {p.name for p in bundle.dir.iterdir()}
    assert {"manifest.json", "workflow.json", "state.json", "trace.ndjson", "session",
            "artifacts"} <= names


def test_the_manifest_pins_the_source_and_changes_only_with_the_status(h: Harness) -> None:
    h.write("big", BIG)
    run_id = h.launch("big", {"text": "short"})
    assert h.execute(run_id).outcome == "completed"
    manifest = h.bundle(run_id).manifest()
    row = h.row(run_id)
    assert manifest["schema"] == "pi-workflows.bundle.v1"
    assert manifest["runId"] == run_id and manifest["status"] == "completed"
    assert manifest["source"] == {"path": row.source_path, "sha256": row.source_sha256}
    assert manifest["digest"] == row.definition_digest
    snapshot = h.bundle(run_id).snapshot()
    assert snapshot["startAt"] == "big" and [n["id"] for n in snapshot["nodes"]] == ["big",
                                                                                     "echo"]


def test_output_using_the_reserved_artifact_key_fails_the_node(h: Harness) -> None:
    h.write("fake", """
        workflow = define_workflow(
            start_at="a",
            nodes=[compute("a", lambda ctx: {"x": [{"$artifact": "sha256:" + "0" * 64,
                                                     "bytes": 3}]})],
        )
    """)
    run_id = h.launch("fake")
    out = h.execute(run_id)
    assert (out.outcome, out.error_code) == ("failed", "output_invalid")
    state = h.state(run_id)  # still readable
    assert "$.x.0" in state["error"]["message"]
    assert "a" not in state["outputs"]


def test_input_and_answers_using_the_reserved_key_are_refused(h: Harness) -> None:
    h.write("big", BIG)
    catalog = discover(h.project, h.root / "global")
    with pytest.raises(UsageError) as err:
        prepare_run(catalog, "big", {"text": {"$artifact": "sha256:00", "bytes": 1}})
    assert err.value.code == "input_invalid"
    assert h.store.list_runs() == []


def test_a_missing_artifact_is_reported_as_a_corrupt_bundle(h: Harness) -> None:
    h.write("big", BIG)
    run_id = h.launch("big", {"text": "z" * 5000})
    h.execute(run_id)
    bundle = h.bundle(run_id)
    for path in bundle.artifacts.path.iterdir():
        path.unlink()
    with pytest.raises(BundleCorrupt):
        bundle.state()


# ---- run ids ----------------------------------------------------------------------


def test_run_ids_have_the_documented_format_and_sort_chronologically() -> None:
    base = 1_800_000_000.0
    ids = [new_run_id("My Workflow_2", now_s=base + offset)
           for offset in (0, 1, 59, 3600, 86_400 * 40, 86_400 * 400)]
    for run_id in ids:
        assert RUN_ID_FORMAT.match(run_id), run_id
        assert "-my-workflow-2-" in run_id
    assert sorted(ids) == ids
    assert ids[0].startswith("20270115T080000Z-")
    same_second = {new_run_id("w", now_s=base) for _ in range(50)}
    assert len(same_second) == 50  # the random suffix keeps them apart


@pytest.mark.parametrize("bad", ["", "../evil", "a/b", "..", ".hidden", "a\x00b", "a b",
                                 "-x", "x" * 201, "run/../../etc", None, 7])
def test_run_ids_that_could_escape_the_runs_dir_are_refused(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(LimitError) as err:
        validate_run_id(bad)
    assert err.value.code == "invalid_run_id"
    with pytest.raises(LimitError):
        Bundle(tmp_path, bad)
    assert list(tmp_path.iterdir()) == []


def test_list_bundles_names_only_real_bundles(h: Harness) -> None:
    h.write("big", BIG)
    first = h.launch("big", {"text": "a"})
    h.execute(first)
    (h.runs / "not-a-bundle").mkdir()
    assert list_bundles(h.runs) == [first]
    assert list_bundles(h.root / "nowhere") == []


# ---- the trace ----------------------------------------------------------------------


def _line(seq: int, **extra: Any) -> bytes:
    return (json.dumps({"seq": seq, "type": "x", **extra}) + "\n").encode()


def test_scan_trace_keeps_the_longest_valid_prefix() -> None:
    good = _line(1) + _line(2)
    assert len(scan_trace(good).events) == 2
    assert scan_trace(good).valid_bytes == len(good)
    for tail in (b'{"seq": 3, "ty', b"not json\n", _line(4), _line(2), b"[1]\n",
                 b'{"seq": "3"}\n', b"\xff\xfe\n", _line(3)[:-1]):
        scan = scan_trace(good + tail + _line(3))
        assert [e["seq"] for e in scan.events] == [1, 2], tail
        assert scan.valid_bytes == len(good)
        assert scan.total_bytes == len(good + tail + _line(3))
    assert scan_trace(b"").events == []


def _parked_direct(tmp_path: Path) -> Direct:
    wf = define_workflow(name="r", start_at="a",
                         nodes=[compute("a", lambda ctx: {"a": 1}),
                                compute("b", lambda ctx: {"b": ctx.outputs["a"]["a"] + 1})],
                         edges=[edge("a", "b")])
    store = Store(tmp_path / "s.sqlite3")
    direct = Direct(store, tmp_path / "runs", "20260101T000000Z-r-00000002", wf, tmp_path)
    direct.enqueue()
    control = Control()
    control.request_park()
    assert direct.start(control=control).run() == "parked"
    direct.park()
    direct.claim()
    return direct


def test_readers_and_resume_ignore_unknown_event_types_and_fields(tmp_path: Path) -> None:
    direct = _parked_direct(tmp_path)
    bundle = Bundle(direct.runs, direct.run_id)
    # A newer writer added an event type, extra event fields and a projection field.
    state = bundle.raw_state()
    line = {"seq": 2, "type": "future_event", "runId": direct.run_id, "at": 1, "payload": {},
            "futureField": {"nested": True}}
    with bundle.trace_path.open("a") as fh:
        fh.write(json.dumps(line) + "\n")
    state.update(traceSeq=2, futureState={"kept": 1})
    bundle.state_path.write_text(json.dumps(state))
    assert [e["type"] for e in bundle.events()] == ["run_started", "future_event"]
    engine = direct.resume()
    assert engine.run() == "completed"
    events = assert_well_formed(bundle)
    assert events[1] == line
    final = bundle.state()
    assert final["futureState"] == {"kept": 1}
    assert final["finalOutput"] == {"b": 2}
    direct.store.close()


def test_a_projection_ahead_of_the_trace_is_reported_not_guessed(tmp_path: Path) -> None:
    direct = _parked_direct(tmp_path)
    bundle = Bundle(direct.runs, direct.run_id)
    state = bundle.raw_state()
    state["traceSeq"] = 5  # lines the trace never got (a power loss with fsync "never")
    bundle.state_path.write_text(json.dumps(state))
    trace = bundle.trace_path.read_bytes()
    with pytest.raises(BundleCorrupt) as err:
        direct.resume()
    assert err.value.code == "bundle_corrupt"
    assert bundle.trace_path.read_bytes() == trace
    direct.store.close()


# ---- the fsync policy -------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["always", "node", "never"])
def test_the_fsync_policy_decides_which_transitions_are_synced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    wf = define_workflow(name="f", start_at="a", nodes=[compute("a", lambda ctx: 1)])
    with Store(tmp_path / "s.sqlite3") as store:
        direct = Direct(store, tmp_path / "runs", "20260101T000000Z-f-00000003", wf, tmp_path)
        direct.enqueue()
        engine = direct.engine(fsync=policy)
        synced: list[str] = []
        real_fsync = os.fsync
        current = {"event": "create"}

        def counting_fsync(fd: int) -> None:
            synced.append(current.get("event", "?"))
            real_fsync(fd)

        append = engine.writer.append

        def tagged(event_type: str, *args: Any, **kwargs: Any) -> int:
            current["event"] = event_type
            return append(event_type, *args, **kwargs)

        engine.writer.append = tagged  # type: ignore[method-assign]
        monkeypatch.setattr(os, "fsync", counting_fsync)
        engine.create(run_input={}, source=SOURCE, digest=definition_digest(wf))
        engine._transition("run_paused", {"at": "a"}, {"paused": True})  # a non-boundary event
        engine.control.request_unpause()
        engine._transition("run_resumed", {"boundary": False}, {"paused": False})
        assert engine.run() == "completed"
        monkeypatch.setattr(os, "fsync", real_fsync)
    events = [e["type"] for e in assert_well_formed(Bundle(direct.runs, direct.run_id))]
    by_event = {e: synced.count(e) for e in set(events)}
    if policy == "never":
        assert synced == []
        return
    assert synced.count("create") >= 3  # snapshot, projection, manifest (+ directory)
    if policy == "always":
        assert all(by_event[e] >= 2 for e in events)  # trace line and projection, at least
    else:
        assert by_event["run_paused"] == 0
        assert all(by_event[e] >= 2 for e in events if e in BOUNDARY_EVENTS)


def test_an_unknown_fsync_policy_is_refused(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite3") as store, pytest.raises(ValueError):
        BundleWriter(Bundle(tmp_path, "r1"), store, "t", fsync="sometimes")
