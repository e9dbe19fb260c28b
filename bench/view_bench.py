"""View benchmark: what the two viewers cost and how soon they show a change.

(a) A real host (concurrency 1) runs paced chains (``bench.watch_bench``'s
workflow); for each run the view stream's run subscription (what
``pi-workflows view`` reads) is followed in this process and the figure of
each trace event is its arrival in a patch minus its own ``at``. (b) The
same through a real ``pi-workflows ui`` server: the run page's event
stream (server-sent events) read over HTTP. (e) The same until the real
``view`` app (Textual, headless) has painted it, and (f) until the run
page in a real Chromium shows it (a MutationObserver on the trace list). (c) A store of ``--runs``
runs (10,000 by default, the newest 200 with real bundles): the run list's
first paint (the list page's full response, and the stream's document
alone) and the server's RSS after it. (d) ``--busy`` runs at once, each
taking about ``--rate`` steps a second, with a list subscription open on
the server: the server's CPU over the window. Figures only; nothing is
asserted. Imports ``bench.host_common``, ``bench.sync_bench``,
``bench.watch_bench`` and ``e2e.harness``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
from pi_workflows.protocol.store import Store
from pi_workflows.supervisor.views.stream import ListQuery, ViewStream

from e2e.harness import HarnessError, Project
from e2e.ui_kit import CHROMIUM, CHROMIUM_ARGS

from .host_common import PROJECTS, bench_project, finish_bench, host_running, load_average, summary
from .sync_bench import fill, run_changed
from .watch_bench import PACED

BUSY = """
import time

from pi_workflows import compute, define_workflow, edge

def paced(i):
    def fn(ctx):
        time.sleep({pause})
        return {{"step": i}}
    return fn

workflow = define_workflow(
    start_at="n0", max_steps=1000,
    nodes=[compute(f"n{{i}}", paced(i)) for i in range({nodes})],
    edges=[edge(f"n{{i}}", f"n{{i + 1}}") for i in range({nodes} - 1)],
)
"""

TINY = """
from pi_workflows import compute, define_workflow

workflow = define_workflow(start_at="a", nodes=[compute("a", lambda ctx: 1)], edges=[])
"""


def _trace_arrivals(patch: dict[str, Any], arrived: float) -> list[float]:
    out = []
    for op in patch["ops"]:
        if op["op"] == "append" and op["path"] == ["trace"]:
            out += [arrived - int(e["at"]) for e in op["values"]]
    return out


def stream_latency(project: Project, runs: int, timeout: float) -> list[float]:
    """(a): every live trace event's latency through a run subscription."""
    stream = ViewStream(project.settings, project.paths)
    got: list[float] = []
    with project.store() as store, host_running(project, 1, "host-a.log"):
        for _ in range(runs):
            run_id = project.enqueue(store, "paced")[0]
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    sub = stream.subscribe_run(run_id)
                    break
                except Exception:  # the row may not be visible yet
                    time.sleep(0.01)
            with sub:
                while time.monotonic() < deadline:
                    patch = sub.next(timeout=1.0)
                    if patch is not None:
                        got += _trace_arrivals(patch, time.time() * 1000)
                    if sub.doc["run"].get("runStatus") in ("completed", "failed"):
                        break
    return got


@contextmanager
def ui_server(project: Project, log: Path) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    """A real ``pi-workflows ui`` on a free port: (process, host:port, token)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pi_workflows", "ui", "--port", "0", "--project",
         str(project.root)], env=project.env, stdout=subprocess.PIPE,
        stderr=open(log, "w"), text=True)  # noqa: SIM115 - closed with the process
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline()
        found = re.search(r"http://(127\.0\.0\.1:\d+)/\S*token=([\w-]+)", line)
        if found is None:
            raise HarnessError(f"`pi-workflows ui` printed {line!r}, not its URL")
        yield proc, found.group(1), found.group(2)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _get(where: str, path: str, token: str) -> tuple[int, bytes]:
    host, port = where.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    sep = "&" if "?" in path else "?"
    conn.request("GET", f"{path}{sep}token={token}")
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, body


def _sse(where: str, path: str, token: str) -> Iterator[tuple[float, dict[str, Any]]]:
    """(arrival epoch ms, data) of each server-sent event of ``path``."""
    host, port = where.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    sep = "&" if "?" in path else "?"
    conn.request("GET", f"{path}{sep}token={token}", headers={"Accept": "text/event-stream"})
    resp = conn.getresponse()
    data: list[str] = []
    try:
        while True:
            raw = resp.fp.readline()
            if not raw:
                return
            line = raw.decode().rstrip("\r\n")
            if line.startswith("data:"):
                data.append(line[5:].lstrip())
            elif line == "" and data:
                arrived = time.time() * 1000
                text, data = "\n".join(data), []
                try:
                    yield arrived, json.loads(text)
                except ValueError:
                    continue
    finally:
        conn.close()


def ui_latency(project: Project, base: Path, runs: int, timeout: float) -> list[float]:
    """(b): every live trace event's latency through the dashboard's run event stream."""
    got: list[float] = []
    with project.store() as store, host_running(project, 1, "host-b.log"), \
            ui_server(project, base / "ui-b.log") as (_, where, token):
        for _ in range(runs):
            run_id = project.enqueue(store, "paced")[0]
            deadline = time.monotonic() + timeout
            for arrived, data in _sse(where, f"/events/runs/{run_id}", token):
                if "ops" in data:
                    got += _trace_arrivals(data, arrived)
                    settled = any(op["op"] == "append" and op["path"] == ["trace"] and any(
                        e.get("type") in ("run_completed", "run_failed") for e in op["values"])
                        for op in data["ops"])
                    if settled:
                        break
                if time.monotonic() > deadline:
                    break
    return got


def _settle_latencies(paints: list[tuple[float, int]], trace: list[dict[str, Any]],
                      since: float) -> list[float]:
    """For each event written after ``since`` (epoch ms): the first paint that showed it."""
    out = []
    for index, event in enumerate(trace):
        at = int(event["at"])
        if at <= since:
            continue
        shown = next((t for t, count in paints if count > index), None)
        if shown is not None:
            out.append(shown - at)
    return out


def app_latency(project: Project, runs: int, timeout: float) -> list[float]:
    """(e): every live event's latency until ``pi-workflows view``'s run screen painted it
    (the real Textual app, headless, on the real view stream)."""
    import asyncio

    from pi_workflows.supervisor.tui import app as tui

    stream = ViewStream(project.settings, project.paths)
    got: list[float] = []
    paints: list[tuple[float, int]] = []
    original = tui.RunScreen._paint

    def recorded(screen: Any) -> None:
        original(screen)
        paints.append((time.time() * 1000, len(screen.followed.doc.get("trace") or [])))

    tui.RunScreen._paint = recorded  # type: ignore[method-assign]

    async def one(run_id: str) -> None:
        app = tui.ViewerApp(stream, ListQuery(), run_id)
        async with app.run_test(headless=True, size=(160, 50)) as pilot:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                await pilot.pause(0.05)
                screen = app.screen
                doc = getattr(getattr(screen, "followed", None), "doc", None) or {}
                if (doc.get("run") or {}).get("runStatus") in ("completed", "failed"):
                    return

    try:
        with project.store() as store, host_running(project, 1, "host-e.log"):
            for _ in range(runs):
                run_id = project.enqueue(store, "paced")[0]
                paints.clear()
                opened = time.time() * 1000
                asyncio.run(one(run_id))
                doc = stream.run_doc(run_id)
                got += _settle_latencies(list(paints), doc["trace"], opened + 500)
    finally:
        tui.RunScreen._paint = original  # type: ignore[method-assign]
    return got


WATCH_TRACE = """() => {
  window.__paints = [];
  const list = document.getElementById("trace");
  new MutationObserver(() => window.__paints.push([Date.now(), list.children.length]))
    .observe(list, {childList: true});
}"""


def page_latency(project: Project, base: Path, runs: int, timeout: float) -> list[float]:
    """(f): every live event's latency until the run page in a real Chromium showed it."""
    from playwright.sync_api import sync_playwright

    got: list[float] = []
    stream = ViewStream(project.settings, project.paths)
    with project.store() as store, host_running(project, 1, "host-f.log"), \
            ui_server(project, base / "ui-f.log") as (_, where, token), \
            sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=CHROMIUM_ARGS)
        page = chromium.new_page()
        for _ in range(runs):
            run_id = project.enqueue(store, "paced")[0]
            page.goto(f"http://{where}/runs/{run_id}?token={token}")
            page.evaluate(WATCH_TRACE)
            opened = time.time() * 1000
            page.wait_for_function(
                "() => /completed|failed/.test(document.getElementById('run-state')"
                ".textContent)", timeout=timeout * 1000)
            paints = [(float(t), int(n)) for t, n in page.evaluate("window.__paints")]
            got += _settle_latencies(paints, stream.run_doc(run_id)["trace"], opened + 200)
        chromium.close()
    return got


def big_list(base: Path, home: Path, count: int) -> dict[str, Any]:
    """(c): the list of a ``count``-run store: first paint and the server's memory."""
    project = bench_project(base, "big", home, "never")
    project.write_workflow("tiny", TINY)
    with Store(project.paths.store_file, synchronous="OFF") as filler:
        fill(filler, count - 200)
    with project.store() as store:
        run_changed(project, store, 200)
    stream = ViewStream(project.settings, project.paths)
    began = time.perf_counter()
    doc = stream.list_doc(ListQuery())
    doc_ms = (time.perf_counter() - began) * 1000
    out: dict[str, Any] = {"doc_ms": doc_ms, "shown": len(doc["runs"])}
    with ui_server(project, base / "ui-c.log") as (proc, where, token):
        _get(where, "/", token)  # the cookie round and imports: not the figure
        paints = []
        for _ in range(5):
            began = time.perf_counter()
            status, body = _get(where, "/", token)
            paints.append((time.perf_counter() - began) * 1000)
        out.update(status=status, bytes=len(body), paint_ms=paints,
                   browser_ms=_browser_paints(where, token),
                   rss_mb=psutil.Process(proc.pid).memory_info().rss / 2**20)
    return out


def _browser_paints(where: str, token: str, rounds: int = 5) -> list[float]:
    """The list page's first contentful paint in a real Chromium (navigation start ->
    the rows on screen), each round a new page."""
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=CHROMIUM_ARGS)
        for _ in range(rounds + 1):
            page = chromium.new_page()
            page.goto(f"http://{where}/?token={token}")
            fcp = page.evaluate(
                "() => new Promise((done) => new PerformanceObserver((list) => {"
                " for (const e of list.getEntries()) if (e.name === 'first-contentful-paint')"
                " done(e.startTime); }).observe({type: 'paint', buffered: true}))")
            out.append(float(fcp))
            if os.environ.get("VIEW_BENCH_DEBUG"):
                print(page.evaluate("() => JSON.stringify([performance.getEntriesByType("
                                    "'navigation')[0], ...performance.getEntriesByType("
                                    "'resource')].map(e => [e.name.slice(-30), "
                                    "Math.round(e.startTime), Math.round(e.responseStart),"
                                    " Math.round(e.responseEnd)]))"))
            page.close()
        chromium.close()
    return out[1:]  # the first warms the browser's caches: not the figure


def busy_cpu(project: Project, base: Path, runs: int, rate: float, seconds: float
             ) -> dict[str, Any]:
    """(d): the server's CPU while ``runs`` runs step ``rate`` times a second each."""
    nodes = int(rate * (seconds + 30))
    project.write_workflow("busy", BUSY.format(pause=1 / rate, nodes=nodes))
    events = [0]
    with project.store() as store, host_running(project, runs, "host-d.log"), \
            ui_server(project, base / "ui-d.log") as (proc, where, token):
        ids = project.enqueue(store, "busy", runs)
        stop = threading.Event()

        def listen() -> None:
            for _ in _sse(where, "/events/runs", token):
                events[0] += 1
                if stop.is_set():
                    return

        threading.Thread(target=listen, daemon=True).start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(
                1 for r in ids if (row := store.get(r)) and row.state == "running") < runs:
            time.sleep(0.2)
        server = psutil.Process(proc.pid)
        cpu0, wall0 = server.cpu_times(), time.monotonic()
        steps0 = _steps(project, ids)
        time.sleep(seconds)
        cpu1, wall1 = server.cpu_times(), time.monotonic()
        steps1 = _steps(project, ids)
        stop.set()
        for run_id in ids:
            store.request_cancel(run_id)
    used = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return {"cores": used / (wall1 - wall0), "steps_per_s": (steps1 - steps0) / (wall1 - wall0),
            "patches": events[0]}


def _steps(project: Project, ids: list[str]) -> int:
    from pi_workflows.protocol.bundle import Bundle
    total = 0
    for run_id in ids:
        try:
            total += int(Bundle(project.paths.runs_dir, run_id).raw_state().get("steps") or 0)
        except (OSError, ValueError):
            continue
    return total


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench view", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="example: python -m bench view --runs 3")
    parser.add_argument("--runs", type=int, default=4, help="runs followed in (a) and (b)")
    parser.add_argument("--nodes", type=int, default=10, help="paced nodes per run")
    parser.add_argument("--store-runs", type=int, default=10_000, help="runs in (c)'s store")
    parser.add_argument("--busy", type=int, default=50, help="runs at once in (d)")
    parser.add_argument("--rate", type=float, default=10.0, help="steps a second of each")
    parser.add_argument("--seconds", type=float, default=10.0, help="(d)'s measuring window")
    parser.add_argument("--timeout", type=float, default=60.0, help="deadline of each wait (s)")
    parser.add_argument("--only", default="abefcd",
                        help="which parts to run, such as 'ac'")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    began = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="pi-wf-view-bench-"))
    home = base / "home"
    print(f"view bench: python {sys.version.split()[0]}, {os.cpu_count()} CPU(s), load average"
          f" {load_average()}; dir {base}")
    try:
        paced = PACED.format(nodes=args.nodes, lead=0.8)
        # The four latency parts: the same paced runs, followed through each viewer.
        parts = {
            "a": ("in a patch of the view stream (what `view` shows)",
                  lambda pr: stream_latency(pr, args.runs, args.timeout)),
            "b": ("in the dashboard's event stream",
                  lambda pr: ui_latency(pr, base, args.runs, args.timeout)),
            "e": ("painted by `view`'s run screen (Textual, headless)",
                  lambda pr: app_latency(pr, args.runs, args.timeout)),
            "f": ("shown on the run page in Chromium",
                  lambda pr: page_latency(pr, base, args.runs, args.timeout)),
        }
        for part, (what, follow) in parts.items():
            if part not in args.only:
                continue
            project = bench_project(base, part, home, "node")
            project.write_workflow("paced", paced)
            got = follow(project)
            print(f"  ({part}) trace event appended -> {what}, {args.runs} runs x"
                  f" {args.nodes} nodes; goal p50 <= 150 ms")
            print(f"      {summary(got)}")
        if "c" in args.only:
            r = big_list(base, home, args.store_runs)
            print(f"  (c) run list of a {args.store_runs}-run store ({r['shown']} shown):"
                  f" first paint in Chromium {summary(r['browser_ms'])} (goal <= 300 ms);"
                  f" the page's response {summary(r['paint_ms'])}, the document alone"
                  f" {r['doc_ms']:.0f} ms; server RSS {r['rss_mb']:.0f} MB (goal <= 80 MB)")
        if "d" in args.only:
            project = bench_project(base, "d", home, "never")
            r = busy_cpu(project, base, args.busy, args.rate, args.seconds)
            print(f"  (d) {args.busy} runs at ~{args.rate:g} steps/s each"
                  f" ({r['steps_per_s']:.0f} steps/s seen), list stream open:"
                  f" server CPU {r['cores']:.2f} cores (goal < 1), {r['patches']} patches")
    except HarnessError as exc:
        print(f"  ! {exc}")
    finally:
        finish_bench(PROJECTS, base, keep=args.keep, began=began)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
