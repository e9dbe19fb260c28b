"""Fixtures for the dashboard's unit tests: the app over a fake view stream."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pi_workflows.protocol.errors import NotFound, UsageError
from pi_workflows.supervisor.web.actions import Actions
from pi_workflows.supervisor.web.app import create_app
from pi_workflows.supervisor.web.security import Access
from pi_workflows.supervisor.web.source import Doc, Filters
from starlette.testclient import TestClient

PORT = 8765
RUN = "20261201T083022Z-pipeline-025acc92"


def run_doc() -> Doc:
    return {"kind": "run", "at": 0, "runId": RUN,
            "run": {"runId": RUN, "workflow": "pipeline", "state": "waiting",
                    "runStatus": "waiting", "queueState": "done", "title": "<b>t</b>",
                    "request": {"question": "Ship?", "choices": [{"label": "yes"}]}},
            "graph": {"startAt": "a", "nodes": [{"id": "a", "kind": "shell"},
                                                 {"id": "b", "kind": "compute"}],
                      "edges": [{"type": "edge", "source": "a", "target": "b"}]},
            "nodes": {"a": "done", "b": "waiting"}, "steps": [], "trace": [], "output": [],
            "conversation": [], "chain": [{"runId": RUN, "state": "waiting"}],
            "bundle": "ok"}


class FakeSub:
    def __init__(self, doc: Doc) -> None:
        self.rev = 0
        self.doc = doc
        self.closed = threading.Event()
        self.sent = False

    def next(self, timeout: float) -> Doc | None:
        if not self.sent:
            self.sent = True
            self.rev += 1
            return {"rev": self.rev, "ops": [{"op": "set", "path": ["total"], "value": 1}]}
        self.closed.wait(min(timeout, 0.05))
        return None

    def close(self) -> None:
        self.closed.set()


class FakeSource:
    def __init__(self) -> None:
        self.subs: list[FakeSub] = []

    def list_doc(self, filters: Filters) -> Doc:
        if filters.state not in (None, "running", "waiting"):
            raise UsageError(f"unknown state {filters.state!r}")
        return {"kind": "runs", "at": 0, "total": 1, "truncated": False,
                "query": filters.as_dict(), "runs": [dict(run_doc()["run"], depth=0)]}

    def run_doc(self, run_id: str) -> Doc:
        if run_id != RUN:
            raise NotFound(f"no run {run_id} in this project")
        return run_doc()

    def subscribe_list(self, filters: Filters) -> FakeSub:
        sub = FakeSub(self.list_doc(filters))
        self.subs.append(sub)
        return sub

    def subscribe_run(self, run_id: str) -> FakeSub:
        sub = FakeSub(self.run_doc(run_id))
        self.subs.append(sub)
        return sub

    def controllers_doc(self) -> Doc:
        return {"kind": "controllers", "at": 0, "notReady": 1, "truncated": False,
                "resources": [{"controller": "filesync", "key": "<k>", "generation": 2,
                               "observedGeneration": 1, "ready": "false",
                               "reason": "<i>Drift</i>", "message": "", "deleting": False,
                               "children": [{"runId": RUN, "state": "done"}]}]}

    def subscribe_controllers(self) -> FakeSub:
        sub = FakeSub(self.controllers_doc())
        self.subs.append(sub)
        return sub


class FakeActions(Actions):
    """The session layer's calls recorded, not made (they have their own tests)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    def answer(self, run: str, fields: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("answer", run, fields))
        if fields.get("choice") == "maybe":
            raise UsageError("maybe is not one of this decision's answers: yes")
        return {"runId": "cont", "message": "answered"}

    def cancel(self, run: str) -> dict[str, Any]:
        self.calls.append(("cancel", run, None))
        return {"runId": run, "message": "cancel requested"}

    def resume(self, run: str) -> dict[str, Any]:
        self.calls.append(("resume", run, None))
        return {"runId": run, "message": "resumed"}

    def fork(self, run: str, from_node: str | None) -> dict[str, Any]:
        self.calls.append(("fork", run, from_node))
        return {"runId": "forked", "message": "forked"}


def make_client(actions: bool = False) -> tuple[TestClient, Access, FakeSource, FakeActions]:
    access = Access(port=PORT, actions=actions)
    source = FakeSource()
    acts = FakeActions()
    app = create_app(source, access, acts if actions else None)
    client = TestClient(app, base_url=f"http://127.0.0.1:{PORT}", raise_server_exceptions=False)
    return client, access, source, acts


@pytest.fixture
def readonly() -> tuple[TestClient, Access, FakeSource, FakeActions]:
    return make_client(actions=False)


@pytest.fixture
def acting() -> tuple[TestClient, Access, FakeSource, FakeActions]:
    return make_client(actions=True)
