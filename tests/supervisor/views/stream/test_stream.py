"""The view stream: documents of real bundles, patches as runs are written, and the
cases a reader meets mid-write (a torn trace tail, a bundle deleted while shown);
it never writes."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from pi_workflows.protocol.paths import Paths
from pi_workflows.protocol.settings import load_settings
from pi_workflows.supervisor.views.stream import ListQuery, ViewStream, apply_ops, states_at

from tests.helpers.definitions import approve_flow
from tests.helpers.engine import GATES, Harness

pytestmark = pytest.mark.timeout(60)

HELD = """
def slow(ctx):
    h.GATES["inside"].set()
    h.GATES["hold"].wait(30)
    return {"built": True}

workflow = define_workflow(
    title="Build it",
    start_at="fetch",
    nodes=[compute("fetch", lambda ctx: 1), compute("build", slow),
           compute("tell", lambda ctx: "done")],
    edges=[edge("fetch", "build"), edge("build", "tell")],
)
"""

QUICK = """
workflow = define_workflow(
    start_at="a",
    nodes=[compute("a", lambda ctx: {"n": 1}), compute("b", lambda ctx: "x" * 5000)],
    edges=[edge("a", "b")],
)
"""


def _paths(h: Harness) -> Paths:
    state = h.root / "state"
    return Paths(project=h.project, home=h.root / "home", state_dir=state,
                 store_file=h.store_path, runs_dir=h.runs, host_lock=state / "host.lock",
                 log_dir=state / "logs")


def _stream(h: Harness) -> ViewStream:
    return ViewStream(load_settings(), _paths(h))


def _files(*roots: Path) -> dict[str, tuple[int, int, bytes]]:
    out = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                st = path.stat()
                out[str(path)] = (st.st_mtime_ns, st.st_mode, path.read_bytes())
    return out


def _until(sub: Any, check: Any, doc: Any) -> Any:
    """Apply patches until ``check(doc)``; each patch's rev is one more, and the copy
    kept by applying them always equals the subscription's own document."""
    for _ in range(200):
        if check(doc):
            return doc
        patch = sub.next(timeout=5.0)
        assert patch is not None, "no change seen"
        assert patch["rev"] == sub.rev
        doc = apply_ops(doc, patch["ops"])
        assert doc == sub.doc
    raise AssertionError("never reached")


def test_the_list_is_newest_first_with_chains_grouped_and_states_shown(h: Harness) -> None:
    h.write("check", approve_flow())
    h.write("quick", QUICK)
    first = h.launch("check", {})
    assert h.execute(first).outcome == "waiting"
    child = h.answer(first, "yes")
    assert h.execute(child).outcome == "completed"
    other = h.launch("quick", {})
    assert h.execute(other).outcome == "completed"
    doc = _stream(h).list_doc(ListQuery())
    assert [(r["runId"], r["depth"], r["state"]) for r in doc["runs"]] == [
        (other, 0, "completed"), (first, 0, "answered"), (child, 1, "completed")]
    assert doc["runs"][1]["continuedBy"] == child
    assert all("input" not in r and "finalOutput" not in r for r in doc["runs"])
    only = _stream(h).list_doc(ListQuery(workflow="quick"))
    assert [r["runId"] for r in only["runs"]] == [other]
    assert [r["runId"] for r in _stream(h).list_doc(ListQuery(state="waiting"))["runs"]] == []
    found = _stream(h).list_doc(ListQuery(text=other[-8:].upper()))
    assert [r["runId"] for r in found["runs"]] == [other]
    cut = _stream(h).list_doc(ListQuery(limit=1))
    assert cut["truncated"] is True and len(cut["runs"]) == 1


def test_a_list_subscription_patches_in_a_run_queued_after_it_started(h: Harness) -> None:
    h.write("quick", QUICK)
    with _stream(h).subscribe_list(ListQuery()) as sub:
        start = sub.doc
        assert sub.rev == 0 and start["runs"] == []
        assert sub.next(timeout=0.1) is None  # nothing moved: no patch
        run = h.launch("quick", {})
        doc = _until(sub, lambda d: [r["runId"] for r in d["runs"]] == [run], start)
        assert doc["runs"][0]["queueState"] == "queued"
        h.execute(run)
        doc = _until(sub, lambda d: d["runs"][0]["state"] == "completed", doc)
        assert sub.rev >= 2


def test_a_run_written_while_it_is_read_shows_each_node_running_then_done(
        h: Harness) -> None:
    h.write("build", HELD)
    GATES.update(inside=threading.Event(), hold=threading.Event())
    run = h.launch("build", {})
    box: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: box.setdefault("out", h.execute(run)))
    worker.start()
    try:
        assert GATES["inside"].wait(20)
        with _stream(h).subscribe_run(run) as sub:
            doc = sub.doc
            assert doc["nodes"] == {"fetch": "done", "build": "running", "tell": "pending"}
            assert doc["run"]["title"] == "Build it"
            assert [s["outcome"] for s in doc["steps"]] == ["ok", "running"]
            GATES["hold"].set()
            doc = _until(sub, lambda d: d["run"].get("runStatus") == "completed", doc)
            assert doc["nodes"] == {"fetch": "done", "build": "done", "tell": "done"}
            assert [s["nodeId"] for s in doc["steps"]] == ["fetch", "build", "tell"]
            assert doc["trace"][-1]["type"] == "run_completed"
            seqs = [e["seq"] for e in doc["trace"]]
            assert seqs == sorted(set(seqs)), "every event once, in order"
    finally:
        GATES["hold"].set()
        worker.join(30)
    assert box["out"].outcome == "completed"


def test_replay_folds_the_node_states_of_a_prefix_of_the_trace(h: Harness) -> None:
    h.write("quick", QUICK)
    run = h.launch("quick", {})
    h.execute(run)
    doc = _stream(h).run_doc(run)
    types = [e["type"] for e in doc["trace"]]
    started_b = types.index("node_started", types.index("node_started") + 1)
    assert states_at(doc, 0) == {"a": "pending", "b": "pending"}
    assert states_at(doc, started_b + 1) == {"a": "done", "b": "running"}
    assert states_at(doc, len(doc["trace"])) == {"a": "done", "b": "done"}


def test_a_large_output_stays_a_reference_and_the_input_never_shows(h: Harness) -> None:
    h.write("quick", QUICK)
    run = h.launch("quick", {"secret": "hunter2-private"})
    h.execute(run)
    doc = _stream(h).run_doc(run)
    out = doc["steps"][1]["output"]
    assert isinstance(out, dict) and out.get("$artifact", "").startswith("sha256:")
    assert "hunter2-private" not in json.dumps(doc)


def test_a_torn_trace_tail_waits_until_its_line_is_complete(h: Harness) -> None:
    h.write("quick", QUICK)
    run = h.launch("quick", {})
    h.execute(run)
    trace = h.bundle(run).trace_path
    lines = trace.read_bytes().splitlines(keepends=True)
    last = lines[-1]
    trace.write_bytes(b"".join(lines[:-1]) + last[: len(last) // 2])  # torn mid-line
    with _stream(h).subscribe_run(run) as sub:
        doc = sub.doc
        assert len(doc["trace"]) == len(lines) - 1
        with open(trace, "ab") as fh:
            fh.write(last[len(last) // 2:])
        doc = _until(sub, lambda d: len(d["trace"]) == len(lines), doc)
        assert doc["trace"][-1] == json.loads(last)


def test_a_bundle_deleted_while_shown_reads_as_missing(h: Harness) -> None:
    h.write("quick", QUICK)
    run = h.launch("quick", {})
    h.execute(run)
    with _stream(h).subscribe_run(run) as sub:
        assert sub.doc["bundle"] == "ok"
        shutil.rmtree(h.bundle(run).dir)
        doc = _until(sub, lambda d: d["bundle"] == "missing", sub.doc)
        assert doc["nodes"] == {} and doc["run"]["runId"] == run


def test_viewing_writes_nothing_and_creates_no_store(h: Harness, tmp_path: Path) -> None:
    h.write("build", HELD)
    h.write("check", approve_flow())
    run = h.launch("check", {})
    h.execute(run)
    h.store.close()
    before = _files(h.runs, h.store_path.parent)
    stream = _stream(h)
    stream.list_doc(ListQuery())
    with stream.subscribe_run(run) as sub:
        sub.next(timeout=0.1)
    with stream.subscribe_list(ListQuery()) as sub:
        sub.next(timeout=0.1)
    assert _files(h.runs, h.store_path.parent) == before
    empty = Paths(project=tmp_path / "p", home=tmp_path / "hm", state_dir=tmp_path / "s",
                  store_file=tmp_path / "s" / "store.sqlite3", runs_dir=tmp_path / "r",
                  host_lock=tmp_path / "s" / "l", log_dir=tmp_path / "s" / "log")
    assert ViewStream(load_settings(), empty).list_doc(ListQuery())["runs"] == []
    assert not os.path.exists(empty.store_file) and not empty.runs_dir.exists()
    h.store = h.store.__class__(h.store_path)  # the harness closes it again


def test_an_unknown_run_and_a_bad_query_are_usage_errors(h: Harness) -> None:
    from pi_workflows.protocol.errors import UsageError
    h.write("quick", QUICK)
    h.execute(h.launch("quick", {}))
    stream = _stream(h)
    with pytest.raises(UsageError):
        stream.run_doc("20261201T000000Z-none-00000000")
    for bad in ("../etc", "a/b", ""):
        with pytest.raises(UsageError):
            stream.run_doc(bad)
    for query in (ListQuery(state="bogus"), ListQuery(limit=0), ListQuery(text="x" * 500)):
        with pytest.raises(UsageError):
            stream.list_doc(query)


def test_the_controllers_document_follows_resources_and_never_shows_a_spec(
        h: Harness) -> None:
    h.store.apply_spec("filesync", "notes", {"token": "private-spec-value"})
    stream = _stream(h)
    with stream.subscribe_controllers() as sub:
        doc = sub.doc
        assert [(r["controller"], r["key"], r["ready"]) for r in doc["resources"]] == [
            ("filesync", "notes", "unknown")]
        assert doc["notReady"] == 1 and "private-spec-value" not in json.dumps(doc)
        res = h.store.get_resource("filesync", "notes")
        assert res is not None
        h.store.write_status("filesync", "notes", res.resource_version, {
            "observed_generation": 1,
            "conditions": [{"type": "Ready", "status": "true", "reason": "InSync"}]})
        doc = _until(sub, lambda d: d["notReady"] == 0, doc)
        assert doc["resources"][0]["reason"] == "InSync"
        assert doc["resources"][0]["observedGeneration"] == 1


def test_a_project_without_a_store_shows_its_first_run_when_the_store_appears(
        tmp_path: Path) -> None:
    from pi_workflows.protocol.store import Store
    state = tmp_path / "state"
    paths = Paths(project=tmp_path / "p", home=tmp_path / "hm", state_dir=state,
                  store_file=state / "store.sqlite3", runs_dir=tmp_path / "runs",
                  host_lock=state / "l", log_dir=state / "log")
    stream = ViewStream(load_settings(), paths)
    with stream.subscribe_list(ListQuery()) as runs, stream.subscribe_controllers() as ctl:
        assert runs.doc["runs"] == [] and ctl.doc["resources"] == []
        assert not paths.store_file.exists()  # subscribing made none
        from pi_workflows.protocol.store import RunSource
        with Store(paths.store_file) as store:
            store.enqueue_detached("20261201T000000Z-first-00000001",
                                   RunSource("first", "/x/first.workflow.py", "0" * 64,
                                             "sha256:" + "0" * 64), {})
            store.apply_spec("gate", "k1", {"n": 1})
        _until(runs, lambda d: [r["runId"] for r in d["runs"]] == [
            "20261201T000000Z-first-00000001"], runs.doc)
        _until(ctl, lambda d: [r["key"] for r in d["resources"]] == ["k1"], ctl.doc)


PI_SESSION = [
    {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-12-02T16:19:26Z",
     "cwd": "/x"},
    {"type": "model_change", "id": "m1", "provider": "scripted", "modelId": "m"},
    {"type": "message", "id": "u1", "timestamp": "2026-12-02T16:19:27Z",
     "message": {"role": "user", "content": [{"type": "text", "text": "Find the files"}]}},
    {"type": "message", "id": "a1", "timestamp": "2026-12-02T16:19:28Z",
     "message": {"role": "assistant", "content": [
         {"type": "text", "text": "x" * 9000},
         {"type": "toolCall", "id": "c1", "name": "workflow",
          "arguments": {"action": "submit", "output": ["a.bin"]}}]}},
]


def test_the_transcript_is_read_from_pis_session_file_as_it_grows(h: Harness) -> None:
    h.write("quick", QUICK)
    run = h.launch("quick", {})
    h.execute(run)
    session = h.bundle(run).session_dir
    session.mkdir(exist_ok=True)
    path = session / "pi-session.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in PI_SESSION))
    with _stream(h).subscribe_run(run) as sub:
        doc = sub.doc
        assert [(e["role"], e["id"]) for e in doc["transcript"]] == [
            ("user", "u1"), ("assistant", "a1")]
        assert doc["transcript"][0]["text"] == "Find the files"
        said = doc["transcript"][1]
        assert said["text"].startswith("x" * 8000) and "1000 more" in said["text"]
        assert said["tools"] == [{"name": "workflow", "arguments":
                                  '{"action": "submit", "output": ["a.bin"]}'}]
        with open(path, "a") as fh:
            fh.write(json.dumps({"type": "message", "id": "t1", "message": {
                "role": "toolResult", "toolName": "workflow", "isError": False,
                "content": [{"type": "text", "text": "Accepted"}]}}) + "\n")
        doc = _until(sub, lambda d: len(d["transcript"]) == 3, doc)
        assert doc["transcript"][2] | {} == {"id": "t1", "at": None, "role": "tool",
                                            "text": "Accepted", "tools": [],
                                            "isError": False, "tool": "workflow"}


def test_a_trace_rewritten_by_a_repair_is_read_again_not_patched_on_top(
        h: Harness) -> None:
    """A resume's repair cuts lines a viewer may have shown, and the resumed run
    writes new events under the same seqs: the open view must end as a fresh one."""
    h.write("quick", QUICK)
    run = h.launch("quick", {})
    h.execute(run)
    trace = h.bundle(run).trace_path
    lines = trace.read_bytes().splitlines(keepends=True)
    with _stream(h).subscribe_run(run) as sub:
        doc = sub.doc
        assert doc["trace"][-1]["type"] == "run_completed"
        kept = lines[:-2]
        last_seq = json.loads(kept[-1])["seq"]
        replaced = trace.with_name("trace.tmp")
        replaced.write_bytes(b"".join(kept))
        os.replace(replaced, trace)  # as the repair writes it: a new file
        doc = _until(sub, lambda d: len(d["trace"]) == len(kept), doc)
        later = [{"seq": last_seq + 1, "type": "run_resumed", "at": 1, "payload": {}},
                 {"seq": last_seq + 2, "type": "run_failed", "at": 2, "payload": {}}]
        with open(trace, "ab") as fh:
            fh.write(b"".join(json.dumps(e).encode() + b"\n" for e in later))
        doc = _until(sub, lambda d: d["trace"][-1]["type"] == "run_failed", doc)
        fresh = _stream(h).run_doc(run)
        assert [e["type"] for e in doc["trace"]] == [e["type"] for e in fresh["trace"]]


def test_a_torn_tail_then_a_rewrite_never_reads_from_the_middle_of_a_line(
        tmp_path: Path) -> None:
    from pi_workflows.supervisor.views.follower import JsonTail
    f = tmp_path / "trace.ndjson"
    f.write_bytes(b'{"seq": 1, "type": "a"}\n{"seq": 2, "ty')
    tail = JsonTail(f)
    assert [r["type"] for r in tail.records()] == ["a"]
    f.write_bytes(b'{"seq": 1, "type": "a"}\n{"seq": 2, "type": "b"}\n{"seq": 3, "type": "c"}\n')
    got = tail.records()
    assert [r["type"] for r in got] == ["b", "c"] or tail.restarted
    assert all(set(r) == {"seq", "type"} for r in got)
