"""The dashboard's access rules: the token, Host and Origin, CSRF, read-only mode."""

from __future__ import annotations

from pi_workflows.supervisor.web.security import Access
from starlette.testclient import TestClient

from .conftest import PORT, RUN, FakeActions, FakeSource

Client = tuple[TestClient, Access, FakeSource, FakeActions]
ORIGIN = f"http://127.0.0.1:{PORT}"


def _login(client: TestClient, access: Access) -> None:
    r = client.get(f"/?token={access.token}", follow_redirects=False)
    assert r.status_code == 200
    cookie = r.headers["set-cookie"]
    assert f"{access.cookie}={access.token}" in cookie
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    client.cookies.set(access.cookie, access.token)


def test_without_the_token_every_route_is_refused(readonly: Client) -> None:
    client, access, _, _ = readonly
    for path in ("/", f"/runs/{RUN}", "/api/runs", f"/api/runs/{RUN}", "/events/runs",
                 "/static/app.js", "/nope"):
        r = client.get(path)
        assert r.status_code == 403, path
        assert r.headers["content-type"].startswith("text/plain")
        assert access.token not in r.text
    assert client.get("/?token=wrong").status_code == 403
    client.cookies.set(access.cookie, "wrong")
    assert client.get("/").status_code == 403


def test_the_token_in_the_url_becomes_a_cookie_and_links_work(readonly: Client) -> None:
    client, access, _, _ = readonly
    r = client.get(f"/?token={access.token}&state=running", follow_redirects=False)
    assert r.status_code == 200 and 'value="running"' in r.text
    assert r.headers["referrer-policy"] == "no-referrer"  # the URL's token goes nowhere
    _login(client, access)
    page = client.get("/")
    assert page.status_code == 200 and "pi-workflows" in page.text
    assert client.get(f"/runs/{RUN}").status_code == 200
    assert client.get("/static/app.js").headers["content-type"].startswith("text/javascript")


def test_a_foreign_host_is_refused_even_with_the_token(readonly: Client) -> None:
    client, access, _, _ = readonly
    _login(client, access)
    for host in ("evil.example:8765", f"127.0.0.1:{PORT + 1}", "127.0.0.1", "",
                 f"localhost.evil:{PORT}"):
        r = client.get("/", headers={"host": host})
        assert r.status_code == 403 and "Host" in r.text, host
    assert client.get("/", headers={"host": f"localhost:{PORT}"}).status_code == 200


def test_a_foreign_origin_is_refused(readonly: Client) -> None:
    client, access, _, _ = readonly
    _login(client, access)
    for origin in ("http://evil.example", f"https://127.0.0.1:{PORT}", "null",
                   f"http://127.0.0.1:{PORT + 1}"):
        assert client.get("/api/runs", headers={"origin": origin}).status_code == 403, origin
    assert client.get("/api/runs", headers={"origin": ORIGIN}).status_code == 200


def test_read_only_has_no_action_controls_and_refuses_every_post(readonly: Client) -> None:
    client, access, _, acts = readonly
    _login(client, access)
    page = client.get(f"/runs/{RUN}").text
    assert "data-action" not in page and "csrf-token" not in page
    for verb in ("answer", "cancel", "resume", "fork"):
        r = client.post(f"/runs/{RUN}/{verb}", json={"text": "x"},
                        headers={"origin": ORIGIN, "x-csrf-token": access.csrf})
        assert r.status_code == 403 and "read-only" in r.text
    assert acts.calls == []


def test_actions_need_the_csrf_token_and_the_origin(acting: Client) -> None:
    client, access, _, acts = acting
    _login(client, access)
    page = client.get(f"/runs/{RUN}").text
    assert f'<meta name="csrf-token" content="{access.csrf}">' in page
    assert 'data-action="cancel"' in page
    url = f"/runs/{RUN}/cancel"
    assert client.post(url, headers={"origin": ORIGIN}).status_code == 403  # no CSRF token
    assert client.post(url, headers={"origin": ORIGIN,
                                     "x-csrf-token": "wrong"}).status_code == 403
    assert client.post(url, headers={"x-csrf-token": access.csrf}).status_code == 403  # no Origin
    assert client.post(url, headers={"origin": "http://evil.example",
                                     "x-csrf-token": access.csrf}).status_code == 403
    assert acts.calls == []
    ok = client.post(url, headers={"origin": ORIGIN, "x-csrf-token": access.csrf})
    assert ok.status_code == 200 and ok.json()["message"] == "cancel requested"
    form = client.post(url, content=f"csrf={access.csrf}".encode(),
                       headers={"origin": ORIGIN,
                                "content-type": "application/x-www-form-urlencoded"})
    assert form.status_code == 200
    assert [c[0] for c in acts.calls] == ["cancel", "cancel"]


def test_a_refused_answer_is_a_clear_4xx(acting: Client) -> None:
    client, access, _, _ = acting
    _login(client, access)
    headers = {"origin": ORIGIN, "x-csrf-token": access.csrf}
    r = client.post(f"/runs/{RUN}/answer", json={"choice": "maybe"}, headers=headers)
    assert r.status_code == 400 and "not one of this decision's answers" in r.text
    assert client.post(f"/runs/{RUN}/answer", json={"choice": "yes"},
                       headers=headers).status_code == 200
    assert client.post(f"/runs/{RUN}/explode", headers=headers).status_code == 404
    assert client.post(f"/runs/{RUN}/answer", content=b"{", headers={
        **headers, "content-type": "application/json"}).status_code == 400
    assert client.post(f"/runs/{RUN}/answer", content=b"x" * 70_000, headers={
        **headers, "content-type": "application/json"}).status_code == 413


def test_run_values_are_escaped(readonly: Client) -> None:
    client, access, _, _ = readonly
    _login(client, access)
    page = client.get(f"/runs/{RUN}").text
    assert "<b>t</b>" not in page and "&lt;b&gt;t&lt;/b&gt;" in page
    assert '<g class="node state-done" data-node="a"' in page


def test_the_event_stream_sends_a_snapshot_then_patches(readonly: Client) -> None:
    client, access, source, _ = readonly
    _login(client, access)
    with client.stream("GET", "/events/runs?state=running") as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = r.iter_lines()
        got = [next(lines) for _ in range(5)]
    assert got[0] == "event: snapshot" and '"rev":0' in got[1]
    assert got[3] == "event: patch" and '"rev":1' in got[4]
    assert source.subs and source.subs[0].closed.wait(5)  # the client went: closed


def test_the_cookie_is_this_servers_own_by_its_port() -> None:
    """Browsers send a cookie to every port of 127.0.0.1: another server's cookie of the
    same name would carry this token there, so the name carries the port."""
    from .conftest import make_client
    client, access, _, _ = make_client()
    r = client.get(f"/?token={access.token}")
    assert r.headers["set-cookie"].startswith(f"pi_workflows_token_{PORT}=")
    other = Access(port=PORT + 1)
    assert other.cookie != access.cookie
    client.cookies.clear()
    client.cookies.set(other.cookie, access.token)  # the right token under another's name
    assert client.get("/").status_code == 403
