"""The dashboard's ASGI app: its routes, their input checks and the live event streams.

Owns ``create_app``: the pages (``/``, ``/runs/{id}``), the documents as
JSON (``/api/runs``, ``/api/runs/{id}``), the Server-Sent Events that keep
them live (``/events/runs``, ``/events/runs/{id}``: a ``snapshot`` event,
then one ``patch`` event per view-stream revision), the two static files,
and, with ``--actions``, the POST routes that act on a run. Every input
is checked before use (run ids, filters, bodies) and every refusal is a
plain-text 4xx; the blocking ``Subscription.next`` runs in a worker thread
and the subscription is closed when the client goes. Imports Starlette,
anyio and the web modules (``web.actions`` brings the session layer);
never ``cli``, ``host`` or another sibling.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from ...protocol.errors import ConflictError, NotFound, PiWorkflowsError, UsageError
from . import pages
from .actions import Actions
from .security import CSRF_CHECKED, MAX_BODY, Access, Guard, parse_query, same
from .source import Filters, Source, Subscription

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
FILTER_KEYS = {"state", "workflow", "text", "limit"}
MAX_FILTER = 200
MAX_LIMIT = 1000
STATIC = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
NEXT_TIMEOUT_S = 1.0  # how long one worker thread blocks before the disconnect is checked
GraphRenderer = Callable[[dict[str, Any]], str]


class Refused(Exception):
    """A request the dashboard answers with ``status`` and one line."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


def _text(status: int, text: str) -> PlainTextResponse:
    return PlainTextResponse(text.rstrip("\n") + "\n", status_code=status)


def run_id(request: Request) -> str:
    value = str(request.path_params.get("run_id", ""))
    if not RUN_ID.fullmatch(value) or ".." in value:
        raise Refused(400, "bad run id")
    return value


def filters(request: Request) -> Filters:
    pairs = parse_query(request.scope.get("query_string", b"")) or []
    found: dict[str, str] = {}
    for key, value in pairs:
        if key == "token":
            continue
        if key not in FILTER_KEYS:
            raise Refused(400, f"unknown query parameter {key[:40]!r}"
                               " (the list takes state, workflow, text, limit)")
        if key in found:
            raise Refused(400, f"{key} is given twice")
        if len(value) > MAX_FILTER or any(ord(c) < 32 for c in value):
            raise Refused(400, f"{key} is too long or holds control characters")
        found[key] = value
    limit = 200
    if found.get("limit"):
        raw = found["limit"]
        if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
            raise Refused(400, f"limit takes a number from 1 to {MAX_LIMIT}")
        limit = int(raw)
    return Filters(state=found.get("state") or None, workflow=found.get("workflow") or None,
                   text=found.get("text") or None, limit=limit)


def no_query(request: Request) -> None:
    """A page that takes no parameters refuses any (but the token), as the list does."""
    for key, _ in parse_query(request.scope.get("query_string", b"")) or []:
        if key != "token":
            raise Refused(400, f"unknown query parameter {key[:40]!r} (this page takes none)")


def _refusal(exc: Exception) -> Response:
    if isinstance(exc, Refused):
        return _text(exc.status, exc.text)
    if isinstance(exc, NotFound):
        return _text(404, str(exc))
    if isinstance(exc, ConflictError):
        return _text(409, str(exc))
    if isinstance(exc, UsageError):
        return _text(400, str(exc))
    if isinstance(exc, PiWorkflowsError):
        return _text(409, str(exc))
    raise exc


Handler = Callable[[Request], Awaitable[Response]]


def _checked(handler: Handler) -> Handler:
    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except (Refused, PiWorkflowsError) as exc:
            return _refusal(exc)
    return wrapped


def _sse(event: str, data: Any) -> bytes:
    text = json.dumps(data, separators=(",", ":"), default=str)
    return f"event: {event}\ndata: {text}\n\n".encode()


async def _events(sub: Subscription) -> AsyncIterator[bytes]:
    try:
        yield _sse("snapshot", {"rev": sub.rev, "doc": sub.doc})
        while True:
            patch = await anyio.to_thread.run_sync(sub.next, NEXT_TIMEOUT_S)
            # A comment line on a quiet second: a gone client shows up as a failed write.
            yield _sse("patch", patch) if patch is not None else b": quiet\n\n"
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(sub.close)


def create_app(source: Source, access: Access, actions: Actions | None = None,
               graph: GraphRenderer | None = None) -> Guard:
    """The app behind its ``Guard``. ``actions`` is used only when ``access.actions``."""
    csrf = access.csrf if access.actions else None

    async def list_page(request: Request) -> Response:
        query = filters(request)
        doc = await anyio.to_thread.run_sync(source.list_doc, query)
        return Response(pages.list_page(doc, query, csrf=csrf), media_type="text/html")

    async def run_page(request: Request) -> Response:
        rid = run_id(request)
        doc = await anyio.to_thread.run_sync(source.run_doc, rid)
        svg = graph(doc) if graph is not None else None
        return Response(pages.run_page(doc, csrf=csrf, svg=svg), media_type="text/html")

    async def list_json(request: Request) -> Response:
        doc = await anyio.to_thread.run_sync(source.list_doc, filters(request))
        return JSONResponse(doc)

    async def run_json(request: Request) -> Response:
        doc = await anyio.to_thread.run_sync(source.run_doc, run_id(request))
        return JSONResponse(doc)

    async def list_events(request: Request) -> Response:
        query = filters(request)
        return await _stream(lambda: source.subscribe_list(query))

    async def run_events(request: Request) -> Response:
        rid = run_id(request)
        return await _stream(lambda: source.subscribe_run(rid))

    async def controllers_page(request: Request) -> Response:
        no_query(request)
        doc = await anyio.to_thread.run_sync(source.controllers_doc)
        return Response(pages.controllers_page(doc, csrf=csrf), media_type="text/html")

    async def controllers_json(request: Request) -> Response:
        no_query(request)
        return JSONResponse(await anyio.to_thread.run_sync(source.controllers_doc))

    async def controllers_events(request: Request) -> Response:
        no_query(request)
        return await _stream(source.subscribe_controllers)

    async def _stream(open_sub: Callable[[], Subscription]) -> Response:
        # Subscribed before the response starts: a bad query or an unknown run is a 4xx,
        # not a stream that breaks after its 200.
        sub = await anyio.to_thread.run_sync(open_sub)
        return StreamingResponse(_events(sub), media_type="text/event-stream",
                                 headers={"x-accel-buffering": "no"})

    async def static(request: Request) -> Response:
        name = str(request.path_params.get("name", ""))
        if name not in STATIC:  # a fixed list: no path from the request reaches the disk
            raise Refused(404, "not found")
        body = resources.files(__package__).joinpath(name).read_bytes()
        return Response(body, media_type=STATIC[name])

    async def act(request: Request) -> Response:
        if not access.actions or actions is None:
            raise Refused(403, "forbidden: read-only")
        rid = run_id(request)
        verb = str(request.path_params.get("verb", ""))
        fields = await _body(request)
        if not request.scope.get(CSRF_CHECKED) and not same(
                _str(fields.get("csrf")), access.csrf):
            raise Refused(403, "forbidden: missing or bad CSRF token")
        assert actions is not None
        handlers: dict[str, Callable[[], dict[str, Any]]] = {
            "answer": lambda: actions.answer(rid, fields),
            "cancel": lambda: actions.cancel(rid),
            "resume": lambda: actions.resume(rid),
            "fork": lambda: actions.fork(rid, fields.get("from")),  # it refuses a non-string
        }
        if verb not in handlers:
            raise Refused(404, "no such action (answer, cancel, resume, fork)")
        result = await anyio.to_thread.run_sync(handlers[verb])
        return JSONResponse(result)

    async def not_found(request: Request) -> Response:
        return _text(404, "not found")

    routes = [
        Route("/", _checked(list_page), methods=["GET"]),
        Route("/runs/{run_id:str}", _checked(run_page), methods=["GET"]),
        Route("/api/runs", _checked(list_json), methods=["GET"]),
        Route("/api/runs/{run_id:str}", _checked(run_json), methods=["GET"]),
        Route("/events/runs", _checked(list_events), methods=["GET"]),
        Route("/events/runs/{run_id:str}", _checked(run_events), methods=["GET"]),
        Route("/controllers", _checked(controllers_page), methods=["GET"]),
        Route("/api/controllers", _checked(controllers_json), methods=["GET"]),
        Route("/events/controllers", _checked(controllers_events), methods=["GET"]),
        Route("/static/{name:str}", _checked(static), methods=["GET"]),
        Route("/runs/{run_id:str}/{verb:str}", _checked(act), methods=["POST"]),
        Route("/{rest:path}", not_found, methods=["GET", "POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers={
        404: lambda request, exc: _text(404, "not found"),
        405: lambda request, exc: _text(405, "method not allowed"),
    })
    return Guard(app, access)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


async def _body(request: Request) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
        raise Refused(413, "request body too large")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise Refused(413, "request body too large")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    try:
        if kind == "application/json":
            value = json.loads(raw.decode("utf-8"))
        elif kind == "application/x-www-form-urlencoded":
            value = dict(parse_qsl(raw.decode("ascii"), keep_blank_values=True,
                                   errors="strict"))
        else:
            raise Refused(415, "send JSON or a form")
    except (UnicodeDecodeError, ValueError) as exc:
        raise Refused(400, "malformed request body") from exc
    if not isinstance(value, dict):
        raise Refused(400, "the body must be an object")
    return value
