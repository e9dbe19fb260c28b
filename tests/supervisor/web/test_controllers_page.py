"""The dashboard's controllers page: resources with Ready, escaped, live, behind the token."""

from __future__ import annotations

from pi_workflows.supervisor.web.security import Access
from starlette.testclient import TestClient

from .conftest import RUN, FakeActions, FakeSource
from .test_security import _login

Client = tuple[TestClient, Access, FakeSource, FakeActions]


def test_the_controllers_page_lists_resources_escaped_with_their_child_runs(
        readonly: Client) -> None:
    client, access, _, _ = readonly
    for path in ("/controllers", "/api/controllers", "/events/controllers"):
        assert client.get(path).status_code == 403, path  # the token first, as everywhere
    _login(client, access)
    page = client.get("/controllers").text
    assert 'data-page="controllers"' in page and "Ready=false" in page
    assert "<i>Drift</i>" not in page and "&lt;i&gt;Drift&lt;/i&gt;" in page
    assert 'data-resource="filesync/&lt;k&gt;"' in page
    assert f'href="/runs/{RUN}"' in page
    assert '<span id="not-ready">1</span>' in page
    assert client.get("/api/controllers").json()["resources"][0]["key"] == "<k>"
    assert 'href="/controllers"' in client.get("/").text  # reachable from every page


def test_the_controllers_event_stream_sends_a_snapshot_then_patches(readonly: Client) -> None:
    client, access, source, _ = readonly
    _login(client, access)
    with client.stream("GET", "/events/controllers") as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        got = [next(lines) for _ in range(5)]
    assert got[0] == "event: snapshot" and '"kind":"controllers"' in got[1]
    assert got[3] == "event: patch"
    assert source.subs and source.subs[0].closed.wait(5)


def test_a_snapshot_the_layout_cannot_place_still_gives_a_page() -> None:
    from pi_workflows.supervisor.web.graphsvg import graph_svg
    assert "no graph" in graph_svg(None, {})
    damaged = {"startAt": "a", "nodes": [{"id": "<a>"}], "edges": [{"type": "edge"}]}
    drawn = graph_svg(damaged, {})
    assert "<a>" not in drawn and ("&lt;a&gt;" in drawn)
