"""Every route fuzzed: bad run ids, traversal, huge and malformed queries give a 4xx, never a 500.

The requests carry the token (so they reach the handlers) and go through the
whole app, its guard included; a static path never serves a file outside the
package's two assets.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pi_workflows.supervisor.web.app import create_app
from starlette.testclient import TestClient

from .conftest import PORT, RUN, make_client

ORIGIN = f"http://127.0.0.1:{PORT}"
ROUTES = ["/runs/{}", "/api/runs/{}", "/events/runs/{}", "/static/{}", "/controllers/{}"]
POSTS = ["/runs/{}/answer", "/runs/{}/cancel", "/runs/{}/resume", "/runs/{}/fork",
         "/runs/{}/{}"]
LISTS = ["/", "/api/runs", "/events/runs", "/controllers", "/api/controllers",
         "/events/controllers"]
TRAVERSAL = ["..", "../..", "..%2f..%2fetc%2fpasswd", "%2e%2e/%2e%2e/etc/passwd",
             "../../pyproject.toml", "..\\..\\x", "%00", "a%00b", "app.js/../../app.py",
             "....//....//etc/passwd", "%252e%252e%252f", "/etc/passwd", "~root", ""]


def _client(actions: bool = True) -> TestClient:
    client, access, _, _ = make_client(actions=actions)
    client.cookies.set(access.cookie, access.token)
    client.headers.update({"origin": ORIGIN, "x-csrf-token": access.csrf})
    return client


def _get(client: TestClient, path: str) -> int:
    if path.startswith("/events/"):
        with client.stream("GET", path) as r:
            return r.status_code
    r = client.get(path, follow_redirects=False)
    if r.status_code == 200:
        # Only a page of ours: the client resolves a plain "/runs/.." to "/" itself.
        assert "data-page=" in r.text or r.headers["content-type"].startswith(
            ("application/json", "text/javascript", "text/css")), path
        assert "[project]" not in r.text and "root:" not in r.text, path
    return r.status_code


def _refused_or_ours(status: int, path: str) -> None:
    assert status < 500, (path, status)
    assert status == 200 or 400 <= status < 500, (path, status)


def test_traversal_never_reaches_a_file() -> None:
    client = _client()
    for bad in TRAVERSAL:
        for route in ROUTES:
            path = route.format(bad)
            _refused_or_ours(_get(client, path), path)
        for route in POSTS:
            status = client.post(route.format(bad, "cancel")).status_code
            assert 400 <= status < 500, (route, bad, status)
    for name in ("app.py", "__init__.py", "static", "../app.py", "app.js.bak"):
        assert client.get(f"/static/{name}").status_code == 404, name


def test_huge_and_malformed_queries_are_4xx() -> None:
    client = _client()
    cases = ["state=" + "x" * 60_000, "text=" + "%" * 5000, "text=%ff%fe",
             "limit=-1", "limit=99999999999999999999", "limit=abc", "limit=0", "state=bogus",
             "state=running&state=waiting", "nope=1", "text=a%00b", "&&&===", "token=x&token=y"]
    for path in LISTS:
        for query in cases:
            status = _get(client, f"{path}?{query}")
            assert 400 <= status < 500, (path, query[:40], status)
    assert _get(client, "/api/runs?state=running&text=build&limit=5") == 200


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=300), route=st.sampled_from(ROUTES + POSTS + LISTS))
def test_any_id_or_query_is_answered_without_a_500(text: str, route: str) -> None:
    client = _client()
    if route in LISTS:
        path = f"{route}?{quote(text, safe='=&%')}"
    else:
        path = route.format(quote(text, safe="/%."), quote(text[:5], safe=""))
    if route in POSTS:
        r = client.post(path, content=text.encode("utf-8", "surrogatepass"),
                        headers={"content-type": "application/json"})
        status = r.status_code
    else:
        status = _get(client, path)
    assert status < 500, (path[:80], status)
    assert status in (200, 303) or 400 <= status < 500


def _raw(query: bytes, path: str = "/") -> tuple[int, bytes]:
    """One GET through the ASGI app itself: no client library between (httpx caps a URL
    at 64 KiB; a raw socket does not)."""
    _, access, source, _ = make_client()
    app = create_app(source, access, None)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(),
             "query_string": query,
             "headers": [(b"host", f"127.0.0.1:{PORT}".encode()),
                         (b"cookie", f"{access.cookie}={access.token}".encode())]}
    anyio.run(app, scope, receive, send)
    return int(sent[0]["status"]), b"".join(m.get("body", b"") for m in sent[1:])


def test_a_100_kib_query_is_refused_before_any_handler() -> None:
    for query in (b"text=" + b"a" * 100_000, b"\xff" * 100_000, b"state=" + b"%" * 100_000):
        for path in ("/", "/api/runs", "/events/runs", f"/runs/{RUN}"):
            status, body = _raw(query, path)
            assert status == 414 and b"too long" in body
    assert _raw(b"text=%ff")[0] == 400
    assert _raw(b"text=\xff")[0] == 400
    assert _raw(b"")[0] == 200


def test_the_known_run_still_works() -> None:
    client = _client()
    assert client.get(f"/runs/{RUN}").status_code == 200
    assert client.get(f"/api/runs/{RUN}").json()["runId"] == RUN
