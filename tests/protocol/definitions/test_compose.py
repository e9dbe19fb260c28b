"""Composition at define time: include() and exits compiled into one flat graph, and
every mistake refused with its own message."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pi_workflows import (
    DEFAULT,
    DefinitionError,
    Workflow,
    compute,
    define_workflow,
    definition_digest,
    edge,
    include,
    included_result,
    snapshot,
    switch,
)
from pi_workflows.protocol.definitions.compose import enclosing_mounts, local_id, mount_of
from pi_workflows.protocol.definitions.discovery import WorkflowLoadError, load_workflow_file
from pi_workflows.protocol.definitions.graph import MountNode
from pi_workflows.protocol.definitions.validation import validate_workflow


def fn(ctx: Any) -> Any:
    return {}


def review() -> Workflow:
    return define_workflow(
        name="review", start_at="score",
        nodes=[compute("score", fn), compute("ok", fn), compute("bad", fn)],
        edges=[switch("score", "$.score", {1: "ok"}, default="bad")],
        exits={"approved": "ok", "rejected": "bad"})


def parent(child: Any = None, **kw: Any) -> Workflow:
    nodes = kw.pop("nodes", [compute("a", fn), include(child or review(), as_="review"),
                             compute("ship", fn), compute("fix", fn)])
    edges = kw.pop("edges", [edge("a", "review"), edge("review.approved", "ship"),
                             edge("review.rejected", "fix")])
    return define_workflow(name="p", start_at=kw.pop("start_at", "a"), nodes=nodes,
                           edges=edges, **kw)


def problems_of(build: Callable[[], Any]) -> list[str]:
    with pytest.raises(DefinitionError) as caught:
        build()
    return caught.value.problems


def test_compiles_to_one_flat_graph_with_entry_and_exit_nodes() -> None:
    wf = parent()
    assert list(wf.nodes) == ["a", "review", "review/score", "review/ok", "review/bad",
                              "review.approved", "review.rejected", "ship", "fix"]
    entry, done = wf.nodes["review"], wf.nodes["review.approved"]
    assert isinstance(entry, MountNode) and entry.exit is None and entry.mount == "review"
    assert isinstance(done, MountNode) and done.exit == "approved"
    assert done.source_node == "review/ok"
    for made in (edge("review", "review/score"), edge("review/ok", "review.approved"),
                 edge("review/bad", "review.rejected")):
        assert made in wf.edges
    inner = [e for e in wf.edges if e.source == "review/score"]
    assert inner == [switch("review/score", "$.score", {1: "review/ok"}, default="review/bad")]
    validate_workflow(wf)  # a built composition passes the rules again (discovery does this)


def test_nested_mounts_prefix_every_level() -> None:
    middle = define_workflow(
        name="middle", start_at="prep",
        nodes=[compute("prep", fn), include(review(), as_="inner"), compute("end", fn)],
        edges=[edge("prep", "inner"), edge("inner.approved", "end"),
               edge("inner.rejected", "end")],
        exits={"done": "end"}, max_steps=7)
    outer = define_workflow(name="o", start_at="outer", nodes=[
        include(middle, as_="outer"), compute("last", fn)], edges=[edge("outer.done", "last")])
    assert "outer/inner/score" in outer.nodes and "outer/inner.approved" in outer.nodes
    deep = outer.nodes["outer/inner.rejected"]
    assert isinstance(deep, MountNode) and deep.mount == "outer/inner"
    assert deep.source_node == "outer/inner/bad"
    entry = outer.nodes["outer"]
    assert isinstance(entry, MountNode) and entry.max_steps == 7
    assert edge("outer/inner.approved", "outer/end") in outer.edges
    assert mount_of("outer/inner/score") == "outer/inner" and mount_of("last") is None
    assert local_id("outer/inner/score") == "score"
    assert enclosing_mounts("outer/inner/score") == ["outer", "outer/inner"]


def test_a_definition_without_composition_keeps_its_snapshot() -> None:
    plain = define_workflow(name="x", start_at="a", nodes=[compute("a", fn)])
    assert "exits" not in snapshot(plain) and "includes" not in snapshot(plain)
    exiting = define_workflow(name="x", start_at="a", nodes=[compute("a", fn)],
                              exits={"done": "a"})
    assert snapshot(exiting)["exits"] == {"done": "a"}
    assert definition_digest(exiting) != definition_digest(plain)


def test_an_included_child_is_a_valid_workflow_on_its_own() -> None:
    child = review()
    assert child.exits == {"approved": "ok", "rejected": "bad"}
    validate_workflow(child)


@pytest.mark.parametrize(("exits", "edges", "message"), [
    ({"done": "nope"}, [edge("a", "b")],
     "exit 'done' names 'nope', which is not a node of this workflow"),
    ({"done": "a"}, [edge("a", "b")],
     "exit 'done' names node 'a', which has an outgoing edge; an exit node ends its branch"
     " (remove the edge or name another node)"),
    ({"bad name": "b"}, [edge("a", "b")],
     "exit name 'bad name' is invalid: use 1-64 letters, digits, '_' or '-', starting with"
     " a letter"),
    ({"x": "b", "y": "b"}, [edge("a", "b")],
     "exits 'x' and 'y' both name node 'b'; give each exit its own node"),
    (["b"], [edge("a", "b")], "exits must be a dict of exit name to node id, got list"),
])
def test_exit_mistakes(exits: Any, edges: list[Any], message: str) -> None:
    assert problems_of(lambda: define_workflow(
        name="w", start_at="a", nodes=[compute("a", fn), compute("b", fn)], edges=edges,
        exits=exits)) == [message]


def test_an_exit_cannot_name_an_include() -> None:
    assert problems_of(lambda: parent(exits={"out": "review"})) == [
        "exit 'out' names include 'review'; an exit names one of this workflow's own nodes"
        " (route the include's exit to one)"]


@pytest.mark.parametrize(("edges", "message"), [
    ([edge("a", "review"), edge("review.approved", "ship"), edge("ship", "fix")],
     "include 'review': exit 'rejected' is not routed; add edge('review.rejected', ...) or"
     " a switch from 'review.rejected'"),
    ([edge("a", "review"), edge("review", "ship"), edge("review.approved", "ship"),
      edge("review.rejected", "fix")],
     "edge 'review' -> 'ship': 'review' is an include; route on its exits (review.approved,"
     " review.rejected), not on the mount itself"),
    ([edge("a", "review"), edge("review.approved", "ship"), edge("review.rejected", "fix"),
      edge("review.maybe", "fix")],
     "edge 'review.maybe' -> 'fix': include 'review' has no exit 'maybe' (its exits:"
     " review.approved, review.rejected)"),
    ([edge("a", "review.approved"), edge("review.approved", "ship"),
      edge("review.rejected", "fix")],
     "edge 'a' -> 'review.approved': targets 'review.approved', an exit of include 'review';"
     " an edge only leaves an exit (target 'review' to enter the include)"),
    ([switch("a", "$.x", {1: "review/ok"}, default="review"), edge("review.approved", "ship"),
      edge("review.rejected", "fix")],
     "switch from 'a': targets 'review/ok', a node inside an include; target the include"
     " itself to enter it"),
])
def test_routing_mistakes(edges: list[Any], message: str) -> None:
    assert problems_of(lambda: parent(edges=edges)) == [message]


def test_the_parent_switches_on_an_exit_output() -> None:
    wf = parent(edges=[edge("a", "review"),
                       switch("review.approved", "$.output.score", {1: "ship"}, default="fix"),
                       edge("review.rejected", "fix")])
    assert wf.start_at == "a"


def test_a_child_without_exits_or_with_an_open_end_is_refused() -> None:
    plain = define_workflow(name="plain", start_at="a", nodes=[compute("a", fn)])
    assert problems_of(lambda: parent(child=plain, nodes=[compute("a", fn), include(
        plain, as_="review")], edges=[edge("a", "review")])) == [
        "include 'review': workflow 'plain' declares no exits; define it with"
        " exits={\"done\": \"<node>\"} to include it"]
    open_end = define_workflow(name="half", start_at="a", nodes=[
        compute("a", fn), compute("b", fn), compute("c", fn)],
        edges=[switch("a", "$.x", {1: "b"}, default="c")], exits={"done": "b"})
    assert problems_of(lambda: parent(child=open_end, edges=[
        edge("a", "review"), edge("review.done", "ship"), edge("ship", "fix")])) == [
        "include 'review': node 'c' of workflow 'half' ends it without an exit; name it in"
        " that workflow's exits= or give it an outgoing edge"]


def test_include_mistakes_of_its_own() -> None:
    assert problems_of(lambda: parent(nodes=[
        compute("a", fn), include(42, as_="review")], edges=[edge("a", "review")])) == [
        "include 'review': the child must be a Workflow, a workflow name or a path, got int"]
    assert problems_of(lambda: parent(nodes=[
        compute("a", fn), include(review(), as_="bad name")], edges=[])) == [
        "nodes[1]: include of 'review': as_ 'bad name' is invalid: use 1-64 letters, digits,"
        " '_' or '-', starting with a letter"]
    assert problems_of(lambda: parent(nodes=[
        compute("a", fn), include(review(), input={1, 2}, as_="review"),  # type: ignore[arg-type]
        compute("ship", fn), compute("fix", fn)])) == [
        "include 'review': input must be JSON data or a callable of ctx"]
    assert problems_of(lambda: parent(nodes=[
        compute("a", fn), compute("review", fn), include(review(), as_="review"),
        compute("ship", fn), compute("fix", fn)])) == [
        "node id 'review' is used by more than one node"]


def test_an_include_without_as_says_as_is_required() -> None:
    # ``as_`` has no usable default: left out, the message names the include and the field.
    assert problems_of(lambda: parent(nodes=[
        compute("a", fn), include("review-step.workflow.py")], edges=[])) == [
        "nodes[1]: include of 'review-step.workflow.py': as_ is required: the mount's node"
        " id, such as include('review-step.workflow.py', as_=\"review\")"]


def test_included_result_checks_the_shape() -> None:
    child = review()
    good = {"exit": "approved", "output": {"score": 1}}
    assert included_result(child, good) == good
    with pytest.raises(ValueError, match="exit 'maybe' is not one of its exits"):
        included_result(child, {"exit": "maybe", "output": 1})
    with pytest.raises(ValueError, match="expected an object with keys exit and output, got"
                                         " list"):
        included_result(child, [])
    with pytest.raises(ValueError, match="its output is not JSON data"):
        included_result(child, {"exit": "approved", "output": {1, 2}})


# --- children from files -------------------------------------------------------------

HEADER = "from pi_workflows import compute, define_workflow, edge, include\n"
CHILD = """
workflow = define_workflow(start_at="s", nodes=[compute("s", lambda ctx: {"v": 1})],
                           exits={"done": "s"})
"""


def _file(path: Path, body: str) -> Path:
    path.write_text(HEADER + textwrap.dedent(body).lstrip())
    return path


def _includer(name: str, child: str) -> str:
    return f"""
workflow = define_workflow(start_at="m", nodes=[include({child!r}, as_="m"),
                           compute("end", lambda ctx: 1)], edges=[edge("m.done", "end")],
                           exits={{"done": "end"}})
"""


def test_a_child_by_path_or_name_is_loaded_and_pinned(tmp_path: Path) -> None:
    child = _file(tmp_path / "step.workflow.py", CHILD)
    sub = tmp_path / "sub"
    sub.mkdir()
    by_path = load_workflow_file(_file(sub / "top.workflow.py",
                                       _includer("top", "../step.workflow.py")))
    by_name = load_workflow_file(_file(tmp_path / "named.workflow.py",
                                       _includer("named", "step")))
    for loaded in (by_path, by_name):
        [pinned] = loaded.workflow.includes
        assert (pinned.mount, pinned.workflow, pinned.path) == ("m", "step", str(child))
        assert "m/s" in loaded.workflow.nodes
    before = by_path.digest
    child.write_text(child.read_text() + "# changed\n")
    again = load_workflow_file(sub / "top.workflow.py")
    assert again.digest != before  # the digest covers every included file's sha256
    assert again.workflow.includes[0].sha256 != by_path.workflow.includes[0].sha256


def test_a_missing_child_is_one_clear_problem(tmp_path: Path) -> None:
    with pytest.raises(WorkflowLoadError) as caught:
        load_workflow_file(_file(tmp_path / "top.workflow.py",
                                 _includer("top", "gone.workflow.py")))
    assert caught.value.problems == [
        f"include 'm': no workflow file 'gone.workflow.py' (relative to {tmp_path})"]
    with pytest.raises(WorkflowLoadError) as caught:
        load_workflow_file(_file(tmp_path / "top.workflow.py", _includer("top", "nobody")))
    assert caught.value.problems == [
        "include 'm': no workflow named 'nobody' (looked beside the including file, in"
        " .pi/workflows and in ~/.pi/agent/workflows)"]


def test_include_cycles_are_refused_with_the_chain(tmp_path: Path) -> None:
    _file(tmp_path / "a.workflow.py", _includer("a", "b"))
    _file(tmp_path / "b.workflow.py", _includer("b", "a.workflow.py"))
    with pytest.raises(WorkflowLoadError) as caught:
        load_workflow_file(tmp_path / "a.workflow.py")
    [problem] = caught.value.problems
    assert problem.startswith("include 'm': cannot load b: invalid workflow definition")
    assert problem.endswith("include 'm': include cycle: a.workflow.py -> b.workflow.py ->"
                            " a.workflow.py")
    _file(tmp_path / "self.workflow.py", _includer("self", "self"))
    with pytest.raises(WorkflowLoadError) as caught:
        load_workflow_file(tmp_path / "self.workflow.py")
    assert caught.value.problems == [
        "include 'm': include cycle: self.workflow.py -> self.workflow.py"]


def test_nested_included_files_are_all_pinned(tmp_path: Path) -> None:
    leaf = _file(tmp_path / "leaf.workflow.py", CHILD)
    mid = _file(tmp_path / "mid.workflow.py", _includer("mid", "leaf"))
    top = _file(tmp_path / "top.workflow.py", """
workflow = define_workflow(start_at="outer", nodes=[include("mid.workflow.py", as_="outer"),
                           compute("end", lambda ctx: 1)], edges=[edge("outer.done", "end")])
""")
    loaded = load_workflow_file(top)
    assert [(f.mount, f.workflow, f.path) for f in loaded.workflow.includes] == [
        ("outer", "mid", str(mid)), ("outer/m", "leaf", str(leaf))]
    assert "outer/m/s" in loaded.workflow.nodes
    leaf.write_text(leaf.read_text() + "# changed\n")
    assert load_workflow_file(top).digest != loaded.digest  # a grandchild is pinned too


def test_the_same_child_twice_under_two_mounts() -> None:
    wf = define_workflow(name="twice", start_at="one", nodes=[
        include(review(), as_="one"), include(review(), as_="two"), compute("end", fn)],
        edges=[edge("one.approved", "two"), edge("one.rejected", "end"),
               edge("two.approved", "end"), edge("two.rejected", "end")])
    assert {"one/score", "two/score", "one.approved", "two.rejected"} <= set(wf.nodes)


def test_a_child_node_on_the_default_timeout_keeps_its_own_workflow_default() -> None:
    child = define_workflow(name="slow", start_at="a", timeout=5,
                            nodes=[compute("a", fn), compute("b", fn, timeout=2)],
                            edges=[edge("a", "b")], exits={"done": "b"})
    wf = define_workflow(name="p", start_at="m", timeout=60, nodes=[
        include(child, as_="m"), compute("end", fn)], edges=[edge("m.done", "end")])
    assert wf.nodes["m/a"].timeout == 5 and wf.nodes["m/b"].timeout == 2
    assert wf.nodes["end"].timeout is DEFAULT and wf.timeout == 60


def test_an_edge_from_inside_an_include_or_to_an_unknown_slash_id() -> None:
    assert problems_of(lambda: parent(edges=[
        edge("a", "review"), edge("review.approved", "ship"), edge("review.rejected", "fix"),
        edge("review/ok", "fix")])) == [
        "edge 'review/ok' -> 'fix': 'review/ok' is inside an include; route from its exits,"
        " not from its nodes"]
    assert problems_of(lambda: parent(edges=[
        edge("a", "review"), edge("review.approved", "ship"), edge("review.rejected", "other/x"),
        edge("ship", "fix")])) == [
        "edge 'review.rejected' -> 'other/x': target 'other/x' is not a node"]


def test_included_result_takes_exit_names_for_a_child_given_by_path() -> None:
    value = {"exit": "done", "output": None}
    assert included_result(("done", "failed"), value) == value
    with pytest.raises(ValueError, match="not a result of 'the included workflow': exit"
                                         " 'done' is not one of its exits \\(ok\\)"):
        included_result(["ok"], value)


def test_a_child_that_hangs_at_import_is_the_including_files_timeout(tmp_path: Path) -> None:
    _file(tmp_path / "slow.workflow.py", "import time\ntime.sleep(30)\n" + CHILD)
    top = _file(tmp_path / "top.workflow.py", _includer("top", "slow"))
    with pytest.raises(WorkflowLoadError) as caught:
        load_workflow_file(top, timeout_s=0.5)
    assert caught.value.reason == ("importing it took longer than 0.5 s (does it wait or loop"
                                   " at import time?)")
    assert caught.value.path == str(top)
