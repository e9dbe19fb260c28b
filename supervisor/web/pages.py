"""The dashboard's HTML: the run list and the run page, rendered on the server.

Owns the two pages' markup: a first paint from the documents (a table of
runs; the run's graph, steps and request), the documents themselves as
inert JSON (``<script type="application/json">``) for ``app.js`` (served as /static/app.js),
which keeps the page live, and the action controls only when the server
runs with ``--actions``. Every value from a run is escaped; the JSON is
escaped for a script element. Imports the standard library and
``web.graphsvg``; never ``cli``, ``host``, ``session`` or another sibling.
"""

from __future__ import annotations

import functools
import json
from html import escape
from importlib import resources
from typing import Any
from urllib.parse import quote

from .graphsvg import graph_svg
from .source import Filters


def _json_script(element_id: str, value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), default=str)
    # "</script>" or "<!--" inside a string must not end the element.
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


@functools.cache
def _css() -> str:
    # Inline, not a second request: the stylesheet blocks the first paint until it
    # arrives (bench view: about 60 ms of a 10,000-run list's first paint).
    return resources.files(__package__).joinpath("app.css").read_text()


def _page(title: str, body: str, *, csrf: str | None, kind: str) -> str:
    meta = f'<meta name="csrf-token" content="{escape(csrf)}">' if csrf else ""
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)} - pi-workflows</title>{meta}"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<style>{_css()}</style></head>"
            f'<body data-page="{kind}" data-mode="{"acting" if csrf else "read-only"}">'
            '<header><a class="brand" href="/">pi-workflows</a>'
            '<nav class="top"><a href="/">runs</a> <a href="/controllers">controllers</a></nav>'
            f'<span class="mode">{"actions on" if csrf else "read-only"}</span>'
            '<span id="live" class="live" title="live updates">connecting</span></header>'
            f"<main>{body}</main>"
            '<script src="/static/app.js" defer></script></body></html>\n')


def _ms(value: Any) -> str:
    if not isinstance(value, int | float):
        return ""
    seconds = value / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def run_row(run: dict[str, Any]) -> str:
    rid = str(run.get("runId", ""))
    depth = run.get("depth") or 0
    progress = run.get("progress") or {}
    detail = progress.get("message") if isinstance(progress, dict) else None
    return (f'<tr data-run="{escape(rid)}" class="depth-{int(bool(depth))}">'
            f'<td class="id"><a href="/runs/{quote(rid, safe="")}">'
            f'{"↳ " if depth else ""}{escape(rid)}</a></td>'
            f'<td>{escape(str(run.get("workflow") or ""))}</td>'
            f'<td>{escape(str(run.get("title") or ""))}</td>'
            f'<td><span class="state state-{escape(str(run.get("state") or ""))}">'
            f'{escape(str(run.get("state") or ""))}</span></td>'
            f'<td>{escape(str(run.get("currentNode") or ""))}'
            f'{" · " + escape(str(detail)) if detail else ""}</td>'
            f'<td class="num">{escape(_ms(run.get("elapsedMs")))}</td></tr>')


def list_page(doc: dict[str, Any], filters: Filters, *, csrf: str | None) -> str:
    runs = [r for r in doc.get("runs") or [] if isinstance(r, dict)]
    rows = "".join(run_row(r) for r in runs)
    form = ('<form class="filters" method="get" action="/">'
            f'<label>state <input name="state" value="{escape(filters.state or "")}"'
            ' placeholder="running, waiting, failed..." size="14"></label>'
            f'<label>workflow <input name="workflow" value="{escape(filters.workflow or "")}"'
            ' size="14"></label>'
            f'<label>text <input name="text" value="{escape(filters.text or "")}" size="18">'
            '</label><button type="submit">filter</button></form>')
    more = "; more match (narrow the filters)" if doc.get("truncated") else ""
    body = (f"<h1>Runs</h1>{form}"
            f'<p class="muted"><span id="count">{len(runs)}</span> shown'
            f'<span id="more">{more}</span></p>'
            '<table class="runs"><thead><tr><th>run</th><th>workflow</th><th>title</th>'
            '<th>state</th><th>node</th><th>elapsed</th></tr></thead>'
            f'<tbody id="runs">{rows}</tbody></table>'
            f'{_json_script("query", filters.as_dict())}')
    return _page("runs", body, csrf=csrf, kind="list")


def resource_row(res: dict[str, Any]) -> str:
    ready = str(res.get("ready") or "unknown")
    word = {"true": "completed", "false": "failed"}.get(ready, "pending")  # the state colours
    children = " ".join(
        f'<a href="/runs/{quote(str(c.get("runId")), safe="")}">{escape(str(c.get("runId")))}</a>'
        for c in res.get("children") or [] if isinstance(c, dict))
    observed = res.get("observedGeneration")
    name = f'{res.get("controller")}/{res.get("key")}'
    return (f'<tr data-resource="{escape(name)}">'
            f'<td>{escape(str(res.get("controller") or ""))}</td>'
            f'<td>{escape(str(res.get("key") or ""))}</td>'
            f'<td><span class="state state-{word}">Ready={escape(ready)}</span>'
            f'{" deleting" if res.get("deleting") else ""}</td>'
            f'<td>{escape(str(res.get("reason") or ""))}</td>'
            f'<td class="num">{escape(str(res.get("generation") or ""))} / '
            f'{escape("-" if observed is None else str(observed))}</td>'
            f'<td>{children}</td></tr>')


def controllers_page(doc: dict[str, Any], *, csrf: str | None) -> str:
    resources = [r for r in doc.get("resources") or [] if isinstance(r, dict)]
    body = ("<h1>Controllers</h1>"
            f'<p class="muted"><span id="not-ready">{escape(str(doc.get("notReady", 0)))}</span>'
            f' not ready of <span id="resources-total">{len(resources)}</span> resources</p>'
            '<table class="runs"><thead><tr><th>controller</th><th>key</th><th>ready</th>'
            '<th>reason</th><th>generation / observed</th><th>child runs</th></tr></thead>'
            f'<tbody id="resources">{"".join(resource_row(r) for r in resources)}</tbody>'
            "</table>")
    return _page("controllers", body, csrf=csrf, kind="controllers")


def _chain(doc: dict[str, Any]) -> str:
    run = doc.get("run") or {}
    links = []
    for item in doc.get("chain") or []:
        if not isinstance(item, dict):
            continue
        rid = str(item.get("runId", ""))
        here = ' class="here"' if rid == doc.get("runId") else ""
        links.append(f'<a{here} href="/runs/{quote(rid, safe="")}">{escape(rid)}</a>'
                     f' <span class="state state-{escape(str(item.get("state") or ""))}">'
                     f'{escape(str(item.get("state") or ""))}</span>')
    forks = []
    parent = run.get("forkedFrom") if isinstance(run, dict) else None
    if isinstance(parent, str):
        forks.append(f'forked from <a href="/runs/{quote(parent, safe="")}">'
                     f'{escape(parent)}</a>')
    for fork in (run.get("forks") or []) if isinstance(run, dict) else []:
        fid = fork.get("runId") if isinstance(fork, dict) else fork
        if isinstance(fid, str):
            forks.append(f'fork <a href="/runs/{quote(fid, safe="")}">{escape(fid)}</a>')
    return ('<nav class="chain" id="chain">'
            + (f'chain: {" → ".join(links)}' if len(links) > 1 else "")
            + (f'<div class="forks">{" · ".join(forks)}</div>' if forks else "")
            + "</nav>")


def _actions(doc: dict[str, Any]) -> str:
    # The controls are always in the markup; app.js shows those the run's state allows,
    # and the server refuses what the state does not (with the CLI's own message).
    return ('<section id="actions" class="actions">'
            '<div id="answer" class="answer" hidden><h3>Answer</h3>'
            '<p id="question"></p><div id="choices"></div>'
            '<form id="answer-text"><input id="answer-input" name="text" size="40"'
            ' placeholder="your answer"><button type="submit" data-action="answer">'
            'answer</button></form></div>'
            '<button type="button" data-action="cancel" id="cancel">cancel run</button>'
            '<button type="button" data-action="resume" id="resume">resume</button>'
            '<button type="button" data-action="fork" id="fork">fork from the selected'
            ' node</button><p id="action-result" role="status"></p></section>')


def run_page(doc: dict[str, Any], *, csrf: str | None, svg: str | None = None) -> str:
    run = doc.get("run") if isinstance(doc.get("run"), dict) else {}
    assert isinstance(run, dict)
    rid = str(doc.get("runId", ""))
    nodes = doc.get("nodes") if isinstance(doc.get("nodes"), dict) else {}
    assert isinstance(nodes, dict)
    drawing = svg if svg is not None else graph_svg(doc.get("graph"), nodes)
    body = (f'<h1><span class="muted">run</span> {escape(rid)}</h1>'
            f'<p class="summary"><span id="run-state" class="state state-'
            f'{escape(str(run.get("state") or ""))}">{escape(str(run.get("state") or ""))}'
            f'</span> {escape(str(run.get("workflow") or ""))}'
            f' <span id="run-title">{escape(str(run.get("title") or ""))}</span>'
            f' <span id="run-detail" class="muted"></span></p>'
            f"{_chain(doc)}"
            f"{_actions(doc) if csrf else ''}"
            '<div class="cols"><section class="graph-pane"><h2>Graph</h2>'
            f'<div id="graph">{drawing}</div></section>'
            '<section class="inspector" id="inspector"><h2>Inspector</h2>'
            '<p class="muted" id="inspector-hint">click a node</p>'
            '<div id="inspector-body"></div></section></div>'
            '<section><h2>Steps</h2><table class="steps"><thead><tr><th>#</th><th>node</th>'
            '<th>kind</th><th>outcome</th><th>duration</th></tr></thead>'
            '<tbody id="steps"></tbody></table></section>'
            '<section><h2>Conversation</h2><div id="conversation" class="chat"></div></section>'
            '<section><h2>Trace</h2><ol id="trace" class="trace"></ol></section>'
            f'{_json_script("run-id", rid)}')
    return _page(rid, body, csrf=csrf, kind="run")
