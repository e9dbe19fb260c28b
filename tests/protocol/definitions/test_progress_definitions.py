"""``shell(..., parse=, updates=parse_line(...))`` in a definition: what ``validate``
refuses (one sentence naming the node and the field), and the snapshot keys, present
only when used so every earlier definition keeps its digest."""

from __future__ import annotations

from typing import Any

import pytest
from pi_workflows import DefinitionError, define_workflow, parse_line, shell
from pi_workflows.protocol.definitions.graph import definition_digest, snapshot
from pi_workflows.protocol.definitions.validation import workflow_problems


def line(text: str) -> Any:
    return None


def parse(result: Any, ctx: Any) -> Any:
    return result


def problems_of(node: Any) -> list[str]:
    with pytest.raises(DefinitionError) as caught:
        define_workflow(name="p", start_at="s", nodes=[node])
    return caught.value.problems


@pytest.mark.parametrize(("node", "problem"), [
    (shell("s", "true", parse="json"),  # type: ignore[arg-type]
     "shell node 's': parse must be a callable (result, ctx) -> output, got str"),
    (shell("s", "true", updates=line),  # type: ignore[arg-type]
     "shell node 's': updates must be parse_line(fn, streams=[...]), got function"),
    (shell("s", "true", updates=parse_line("x")),  # type: ignore[arg-type]
     "shell node 's': updates: parse_line's fn must be a callable (line) -> update or None,"
     " got str"),
    (shell("s", "true", updates=parse_line(line, streams="stdout")),
     "shell node 's': updates: parse_line's streams must be a non-empty list of 'stdout' and"
     " 'stderr', got 'stdout'"),
    (shell("s", "true", updates=parse_line(line, streams=[])),
     "shell node 's': updates: parse_line's streams must be a non-empty list of 'stdout' and"
     " 'stderr', got ()"),
    (shell("s", "true", updates=parse_line(line, streams=["stdout", "log"])),
     "shell node 's': updates: parse_line's streams must be a non-empty list of 'stdout' and"
     " 'stderr', got ('stdout', 'log')"),
    (shell("s", "true", updates=parse_line(line, streams=["stderr", "stderr"])),
     "shell node 's': updates: parse_line's streams name a stream twice:"
     " ('stderr', 'stderr')"),
])
def test_each_mistake_has_its_own_sentence(node: Any, problem: str) -> None:
    assert problems_of(node) == [problem]


def test_a_valid_use_passes_and_both_streams_may_be_read() -> None:
    wf = define_workflow(name="p", start_at="s", nodes=[
        shell("s", "make", parse=parse, updates=parse_line(line, streams=["stdout", "stderr"]))])
    assert workflow_problems(wf) == []


def test_the_snapshot_names_parse_and_updates_only_when_used() -> None:
    plain = define_workflow(name="p", start_at="s", nodes=[shell("s", "make")])
    node, = snapshot(plain)["nodes"]
    assert set(node) == {"id", "kind", "timeout", "command", "cwd", "env", "stdin",
                         "allowNonzeroExit", "maxOutputBytes", "idempotent"}
    used = define_workflow(name="p", start_at="s", nodes=[
        shell("s", "make", parse=parse, updates=parse_line(line, streams=("stderr",)))])
    node, = snapshot(used)["nodes"]
    assert node["parse"] == {"callable": "parse"}
    assert node["updates"] == {"parseLine": {"callable": "line"}, "streams": ["stderr"]}
    assert definition_digest(used) != definition_digest(plain)
    other = define_workflow(name="p", start_at="s", nodes=[
        shell("s", "make", parse=parse, updates=parse_line(line, streams=("stdout",)))])
    assert definition_digest(other) != definition_digest(used)
