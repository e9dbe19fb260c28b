"""Who may talk to the dashboard: the token, the Host and Origin rules, CSRF, the limits.

Owns ``Guard``, a pure ASGI middleware in front of every route: a request
without the server's token (query ``token=`` or the cookie it sets) is
refused, as is one whose ``Host`` is not this server's own (DNS rebinding)
or whose ``Origin`` is another site's; a POST also needs the per-server
CSRF token (header ``X-CSRF-Token`` or form field ``csrf``), and is
refused outright unless the server runs with ``--actions``. Oversized or
undecodable query strings are refused before a handler sees them. Every
refusal is a short plain-text 4xx. Imports the standard library only;
never ``cli``, ``host`` or another sibling.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qsl

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# The cookie's name carries the port: browsers send a cookie to every port of a host
# (RFC 6265), so one name would hand this token to any server on 127.0.0.1, and two
# dashboards would overwrite each other's.
COOKIE_PREFIX = "pi_workflows_token_"
CSRF_HEADER = "x-csrf-token"
CSRF_CHECKED = "pi_workflows.csrf"  # the scope key set once the header's token matched
MAX_QUERY = 4096  # bytes: a filter is a few words; anything longer is not ours
MAX_PATH = 1024
MAX_BODY = 64 * 1024  # an answer is at most a few KiB of text

# Every response carries these: no framing, no sniffing, no referrer (the URL may
# hold the token), scripts only from this server (the graph's SVG carries its own
# <style>, so styles may be inline), nothing cached.
SECURITY_HEADERS: list[tuple[bytes, bytes]] = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline';"
     b" img-src 'self' data:; connect-src 'self'; form-action 'self';"
     b" frame-ancestors 'none'; base-uri 'none'"),
]


def new_token() -> str:
    return secrets.token_urlsafe(24)


@dataclass
class Access:
    """The secrets and switches of one server; ``port`` is the port it is bound to."""

    port: int
    actions: bool = False
    token: str = field(default_factory=new_token)
    csrf: str = field(default_factory=new_token)

    def hosts(self) -> set[str]:
        return {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}

    @property
    def cookie(self) -> str:
        return f"{COOKIE_PREFIX}{self.port}"

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/?token={self.token}"


def same(given: str | None, secret: str) -> bool:
    """A constant-time comparison that also refuses a missing value."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"),
                               secret.encode("utf-8"))


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers (first of each name), decoded as HTTP allows (latin-1)."""
    out: dict[str, str] = {}
    for name, value in scope.get("headers", []):
        out.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return out


def _cookie(header: str | None, name: str) -> str | None:
    if not header:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


def parse_query(raw: bytes) -> list[tuple[str, str]] | None:
    """The query's pairs, or None when it is not UTF-8 percent-encoding."""
    try:
        text = raw.decode("ascii")
        return parse_qsl(text, keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError):
        return None


async def refuse(send: Send, status: int, text: str,
                 extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = (text.rstrip("\n") + "\n").encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                            *SECURITY_HEADERS, *(extra or [])]})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """The ASGI middleware that applies ``Access`` to every HTTP request."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":  # the dashboard has none; never accept one
                await send({"type": "websocket.close", "code": 1008})
                return
            await self.app(scope, receive, send)
            return
        problem = self.check(scope)
        if problem is not None:
            await refuse(send, *problem)
            return
        pairs = parse_query(scope.get("query_string", b"")) or []
        # A token given in the URL is kept in a cookie, so links, reloads and the
        # page's own requests work without it (as Jupyter does).
        remember = any(k == "token" for k, _ in pairs)
        await self.app(scope, receive, self._secured(send, remember))

    def _cookie_header(self) -> bytes:
        return (f"{self.access.cookie}={self.access.token}; HttpOnly; SameSite=Strict; Path=/"
                ).encode()

    def _secured(self, send: Send, remember: bool) -> Send:
        cookie = [(b"set-cookie", self._cookie_header())] if remember else []

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS,
                                      *cookie]
            await send(message)
        return wrapped

    def check(self, scope: Scope) -> tuple[int, str] | None:
        """(status, reason) when the request is refused, else None."""
        access = self.access
        headers = _headers(scope)
        if headers.get("host") not in access.hosts():
            return 403, "forbidden: unknown Host (this server answers 127.0.0.1 only)"
        origin = headers.get("origin")
        if origin is not None and origin not in {f"http://{h}" for h in access.hosts()}:
            return 403, "forbidden: cross-origin request"
        raw = scope.get("query_string", b"")
        path = scope.get("path", "")
        if len(raw) > MAX_QUERY or len(path) > MAX_PATH:
            return 414, "request URI too long"
        pairs = parse_query(raw)
        if pairs is None:
            return 400, "malformed query string"
        tokens = [v for k, v in pairs if k == "token"]
        given = tokens[0] if tokens else _cookie(headers.get("cookie"), access.cookie)
        if len(tokens) > 1 or not same(given, access.token):
            return 403, "forbidden: open the URL `pi-workflows ui` printed (it holds the token)"
        method = scope.get("method", "GET")
        if method in ("GET", "HEAD"):
            return None
        if method != "POST":
            return 405, "method not allowed"
        if not access.actions:
            return 403, "forbidden: read-only (start `pi-workflows ui --actions` to act on runs)"
        if origin is None:
            return 403, "forbidden: a POST needs an Origin header"
        # The form field is checked by the handler (it has to read the body);
        # a header is checked here.
        if CSRF_HEADER in headers:
            if not same(headers[CSRF_HEADER], access.csrf):
                return 403, "forbidden: bad CSRF token"
            scope[CSRF_CHECKED] = True
        return None
