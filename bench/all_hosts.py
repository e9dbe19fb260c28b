"""``bench all`` collectors that run real hosts, workers, watchers, Pi or DBOS.

Worker start-up (``bench.host_boot``), throughput, latency and ``kill -9``
recovery with the memory of the workers held in a node
(``bench.host_throughput``, ``bench.host_latency``, ``bench.host_recovery``),
``watch`` latency (``bench.watch_bench``), ``cancel`` (``bench.cancel_bench``),
Pi cold vs warm first token (``bench.agent_bench``, skipped when Pi is not
installed) and the peer comparison (``bench.peers_pi``/``bench.peers_dbos``,
skipped with the install hint when DBOS is not). Each takes one run of its
figures with the sizes ``--quick`` or the defaults ask for and returns plain
numbers. Imports those bench modules, ``bench.all_ctx`` and ``e2e``.
"""

from __future__ import annotations

import statistics

from e2e.pi_env import PiNotInstalled, pi_binary

from . import (
    agent_bench,
    cancel_bench,
    host_boot,
    host_latency,
    host_recovery,
    host_throughput,
    peers_dbos,
    peers_pi,
    watch_bench,
)
from .all_ctx import Ctx, Figures, Skip, mb, p50, p99, ratio
from .host_common import HOLD, bench_project, host_running, span

NODES = 10  # compute nodes per run, the workload


def boot(ctx: Ctx, rnd: int) -> Figures:
    r = host_boot.worker_boot(ctx.where("boot", rnd), ctx.home, ctx.size(8, 2))
    bare = p50(r["reference"]["python -c pass"])
    zygote = r["zygote_mem"] or (None, None)
    return {
        "worker start-up, the zygote's spare (hot path) p50": (p50(r["forked_ms"]), "ms"),
        "worker start-up, forked on request (spare off) p50":
            (p50(r["forked_on_request_ms"]), "ms"),
        "worker start-up, cold spawn p50": (p50(r["cold_ms"]), "ms"),
        "cold spawn over `python -c pass`": (ratio(p50(r["cold_ms"]), bare), "x"),
        "zygote boot (spawn -> booted)": (r["zygote_boot_ms"], "ms"),
        "zygote RSS": (mb(zygote[0]), "MB"),
        "zygote USS": (mb(zygote[1]), "MB"),
    }


def throughput(ctx: Ctx, rnd: int) -> Figures:
    runs, out = ctx.size(100, 6), {}
    where = ctx.where("throughput", rnd)
    for concurrency in (1, 2, 4):
        r = host_throughput.throughput(where, ctx.home, "node", concurrency, runs, NODES,
                                       ctx.timeout)
        ok = not r.get("timeout") and not r["not_done"]
        what = f"{runs} runs x {NODES} nodes, concurrency {concurrency}"
        out[f"throughput runs/s ({what})"] = (r["runs_per_s"] if ok else None, "runs/s")
        out[f"throughput nodes/s ({what})"] = (r["nodes_per_s"] if ok else None, "nodes/s")
        out[f"host RSS peak while it runs, concurrency {concurrency}"] = (
            mb(r["host_peak_rss"]), "MB")
    return out


def latency(ctx: Ctx, rnd: int) -> Figures:
    r = host_latency.latency(ctx.where("latency", rnd), ctx.home, "node", ctx.size(30, 4),
                             NODES, ctx.timeout)
    first = span(r["timelines"], "enqueued", "node_started")
    hot = span(r["timelines"], "claimed", "ready")
    off = host_latency.latency(ctx.where("latency-nospare", rnd), ctx.home, "node",
                               ctx.size(30, 4), NODES, ctx.timeout, spare=False)
    first_off = span(off["timelines"], "enqueued", "node_started")
    return {"queued -> first node_started p50 (host idle)": (p50(first), "ms"),
            "queued -> first node_started p99 (host idle)": (p99(first), "ms"),
            "claimed -> worker ready (spare handed over) p50": (p50(hot), "ms"),
            "queued -> first node_started p50, spare off": (p50(first_off), "ms"),
            "claimed -> worker ready (forked on request) p50, spare off":
                (p50(span(off["timelines"], "claimed", "ready")), "ms")}


def recovery(ctx: Ctx, rnd: int) -> Figures:
    runs = ctx.size(20, 4)
    r = host_recovery.recovery(ctx.where("recovery", rnd), ctx.home, "node", runs, ctx.timeout)
    if r.get("error"):
        raise RuntimeError(r["error"])
    zygote = r["zygote"][0] if r.get("zygote") else (None, None)
    return {
        f"kill -9 of the host, {runs} runs in a node -> all back in it": (
            r["at_once"]["running_s"], "s"),
        f"the same with the workers frozen (SIGSTOP), {runs} runs": (
            r["frozen"]["running_s"], "s"),
        "new host start-up (spawn -> ready), after the kill": (
            r["at_once"]["host_startup_s"], "s"),
        "worker RSS, a run blocked in a node, p50": (mb(p50(r["worker_rss"])), "MB"),
        "worker USS, a run blocked in a node, p50": (mb(p50(r["worker_uss"])), "MB"),
        "zygote RSS beside them": (mb(zygote[0]), "MB"),
        "host RSS idle (zygote booted)": (mb(r["host_idle_rss"]), "MB"),
        f"host RSS with {runs} workers": (mb(r["host_loaded_rss"]), "MB"),
    }


def watch(ctx: Ctx, rnd: int) -> Figures:
    r = watch_bench.measure(ctx.where("watch", rnd), ctx.home, ctx.size(3, 1),
                            ctx.size(10, 4), 0.8, ctx.timeout)
    if r["errors"]:
        raise RuntimeError("; ".join(r["errors"]))
    lat = r["latency_ms"]
    return {"trace event appended -> `watch --json` line p50": (p50(lat), "ms"),
            "trace event appended -> `watch --json` line p99": (p99(lat), "ms")}


def cancel(ctx: Ctx, rnd: int) -> Figures:
    project = bench_project(ctx.where("cancel", rnd), "cancel", ctx.home, "node")
    project.write_workflow("hold", HOLD)
    inner, outer = [], []
    with project.store() as store, host_running(project, 1, "host.log"):
        for _ in range(ctx.size(5, 2)):
            got = cancel_bench.sample(project, store, ctx.timeout)
            if got is not None:
                inner.append(got[0])
                outer.append(got[1])
    project.cleanup()
    return {"cancel_requested -> cancelled, a node running, p50": (p50(inner), "ms"),
            "`cancel` CLI start -> cancelled p50": (p50(outer), "ms")}


def agent(ctx: Ctx, rnd: int) -> Figures:
    bench = ctx.cache.get("agent")
    if bench is None:
        try:
            pi_binary()
        except PiNotInstalled as exc:
            raise Skip(f"{exc}; Pi's figures need it") from exc
        bench = ctx.stack.enter_context(agent_bench.bench_setup(ctx.base / "agent",
                                                                ctx.timeout))
        ctx.stack.callback(agent_bench.cleanup, bench)  # closed before the model stops
        ctx.cache["agent"] = bench
    r = agent_bench.startup(bench, ctx.size(3, 1))
    if r["failed"]:
        raise RuntimeError("; ".join(r["failed"]))
    cold = p50(agent_bench.spans(r["cold"], "start", "first_token"))
    warm = p50(agent_bench.spans(r["warm"], "start", "first_token"))
    return {
        "Pi cold: agent step start -> first token p50": (cold, "ms"),
        "Pi warmed: agent step start -> first token p50": (warm, "ms"),
        "Pi cold over warmed, first token": (ratio(cold, warm), "x"),
        "Pi warmed: step start -> prompt accepted p50": (
            p50(agent_bench.spans(r["warm"], "start", "accepted")), "ms"),
        "Pi's own start-up (warm() -> answers get_state) p50": (p50(r["ready"]), "ms"),
    }


def peers(ctx: Ctx, rnd: int) -> Figures:
    if not peers_dbos.available():
        raise Skip(peers_dbos.INSTALL.replace("\n", " ").replace("  ", " "))
    where, runs = ctx.where("peers", rnd), ctx.size(100, 10)
    samples, held = ctx.size(10, 3), ctx.size(20, 4)
    dbos_tp = peers_dbos.throughput(where / "dbos-tp", "wal", runs, NODES, 0, 1.0, ctx.timeout)
    pi_tp = peers_pi.throughput(where / "pi-tp", ctx.home, "node", 4, runs, NODES, ctx.timeout)
    dbos_lat = peers_dbos.latency(where / "dbos-lat", "wal", samples, NODES, 1.0, ctx.timeout)
    pi_lat = peers_pi.latency(where / "pi-lat", ctx.home, "node", samples, NODES, ctx.timeout)
    dbos_rec = peers_dbos.recovery(where / "dbos-rec", "wal", held, 1.0, ctx.timeout)
    pi_rec = peers_pi.recovery(where / "pi-rec", ctx.home, "node", held, ctx.timeout)
    errors = [r["error"] for r in (dbos_tp, pi_tp, dbos_lat, pi_lat, dbos_rec, pi_rec)
              if r.get("error")]
    if errors:
        raise RuntimeError("; ".join(str(e) for e in errors))
    a, b = statistics.median(pi_lat["first_ms"]), statistics.median(dbos_lat["first_ms"])
    return {
        f"DBOS (SQLite WAL) workflows/s, {runs} x {NODES} steps": (dbos_tp["runs_per_s"],
                                                                   "runs/s"),
        f"pi-workflows concurrency 4, {runs} x {NODES} nodes": (pi_tp["runs_per_s"], "runs/s"),
        "throughput pi / DBOS (above 1: pi faster)": (
            ratio(pi_tp["runs_per_s"], dbos_tp["runs_per_s"]), "x"),
        "idle enqueue -> first step p50, DBOS": (b, "ms"),
        "idle enqueue -> first step p50, pi-workflows": (a, "ms"),
        "latency pi / DBOS (below 1: pi quicker)": (ratio(a, b), "x"),
        f"kill -9, {held} in flight -> all back, DBOS": (dbos_rec["running_s"], "s"),
        f"kill -9, {held} in flight -> all back, pi-workflows": (pi_rec["running_s"], "s"),
        "recovery pi / DBOS (below 1: pi quicker)": (
            ratio(pi_rec["running_s"], dbos_rec["running_s"]), "x"),
    }
