"""``bench all`` collectors that need no host: store, engine, steps, sync and the CLI.

Each collector takes one run of its figures by calling the measurement
functions of its own bench module (``bench.store_bench``,
``bench.engine_bench``, ``bench.steps_bench``, ``bench.sync_bench``,
``bench.cli_bench``) with the sizes ``--quick`` or the defaults ask for,
and returns plain numbers (``bench.all_ctx.Figures``). What is costly to
build and not what is measured (the 10,000-run store, the CLI's project)
is built once and kept in the context's cache across runs. Imports those
bench modules and ``bench.all_ctx``.
"""

from __future__ import annotations

import statistics
import sys

from . import cli_bench, engine_bench, steps_bench, store_bench, sync_bench
from .all_ctx import Ctx, Figures, p50, ratio


def store(ctx: Ctx, rnd: int) -> Figures:
    where, seconds = ctx.where("store", rnd), ctx.seconds(1.5, 0.2)
    out: Figures = {}
    for mode in ("NORMAL", "FULL"):
        bare = store_bench.bare_commits(where, mode, seconds)
        cycles, cas = store_bench.store_cycles(where, mode, seconds)
        out[f"store CAS transitions/s, synchronous={mode}"] = (cas, "/s")
        out[f"bare single-row SQLite commits/s, {mode}"] = (bare, "/s")
        # A cycle is five write transactions (enqueue + the four CAS steps).
        out[f"store commits/s over bare commits/s, {mode}"] = (cycles * 5 / bare, "x")
    depth = ctx.size(1_000, 100)
    median, worst_1pc, _ = store_bench.claim_latency(where, depth, ctx.size(300, 50))
    out[f"claim_next p50, {depth:,} queued"] = (median, "ms")
    out[f"claim_next p99, {depth:,} queued"] = (worst_1pc, "ms")
    return out


def engine(ctx: Ctx, rnd: int) -> Figures:
    where, seconds, cap = ctx.where("engine", rnd), ctx.seconds(1.0, 0.15), ctx.size(500, 60)
    out: Figures = {}
    for policy in ("always", "node", "never"):
        run = engine_bench._Run(where, f"t-{policy}", policy, "NORMAL")
        try:
            samples = engine_bench._timed(run.transition, seconds, cap)
        finally:
            run.close()
        out[f"node transition, fsync={policy}"] = (statistics.median(samples), "ms")
    bare = statistics.median(engine_bench.bare_full_commit(where, seconds, cap))
    plain = statistics.median(engine_bench.append_fsync(where, seconds, cap))
    out["bare SQLite commit, WAL, synchronous=FULL"] = (bare, "ms")
    out["append one line + fsync, plain file"] = (plain, "ms")
    node = out["node transition, fsync=node"][0]
    out["node transition fsync=node over bare FULL commit"] = (ratio(node, bare), "x")
    out["node transition fsync=node over append+fsync"] = (ratio(node, plain), "x")
    return out


def steps(ctx: Ctx, rnd: int) -> Figures:
    """Per-node time early and late in one long run (fsync=never: the growth, not the disk)."""
    late, window = ctx.size(1_000, 150), ctx.size(200, 40)
    out: Figures = {}
    for kind, make in (("loop", steps_bench._loop), ("chain", steps_bench._chain)):
        stamps, _ = steps_bench._run(ctx.where(f"steps-{kind}", rnd), make(late + window + 5),
                                     "never")
        early = steps_bench._per_node_ms(stamps, 10, window)
        after = steps_bench._per_node_ms(stamps, late, window)
        out[f"{kind}: per node at step 10"] = (early, "ms")
        out[f"{kind}: per node at step {late:,}"] = (after, "ms")
        out[f"{kind}: step {late:,} over step 10"] = (ratio(after, early), "x")
    return out


def sync(ctx: Ctx, rnd: int) -> Figures:
    runs, changed = ctx.size(10_000, 1_000), ctx.size(100, 20)
    inproc, cli = ctx.size(10, 3), ctx.size(5, 2)
    big: sync_bench.BigStore | None = ctx.cache.get("sync")
    if big is None:  # one store for every run; each run syncs its own fresh sessions
        sessions = [f"r{r}-{kind}-{i}" for r in range(ctx.repeat)
                    for kind, n in (("in", inproc), ("cli", cli)) for i in range(n)]
        big = ctx.cache["sync"] = sync_bench.build_big(ctx.base / "sync", ctx.home, runs,
                                                       changed, sessions, [])
    mine = sync_bench.syncs(big, [f"r{rnd}-in-{i}" for i in range(inproc)])
    again = sync_bench.syncs(big, [f"r{rnd}-in-{i}" for i in range(inproc)])
    ends, bare = [], []
    for i in range(cli):  # interleaved with a bare interpreter, the floor of any subprocess
        bare.append(cli_bench.timed([sys.executable, "-c", "pass"], big.project.env)[0])
        ends += sync_bench.cli_syncs(big.project, [f"r{rnd}-cli-{i}"])[0]
    what = f"{runs:,} runs, {changed} changed"
    out: Figures = {
        f"sync in-process ({what}) p50": (p50([a + b for a, b, _, _ in mine]), "ms"),
        f"sync in-process, nothing new ({runs:,} runs) p50":
            (p50([a + b for a, b, _, _ in again]), "ms"),
        f"`sync --json` subprocess ({what}) p50": (p50(ends), "ms"),
        "`python -c pass` beside it p50": (p50(bare), "ms"),
    }
    out["`sync --json` over `python -c pass`"] = (ratio(p50(ends), p50(bare)), "x")
    return out


def cli(ctx: Ctx, rnd: int) -> Figures:
    got = ctx.cache.get("cli")
    if got is None:
        (ctx.base / "cli").mkdir()
        got = ctx.cache["cli"] = cli_bench.make_project(ctx.base / "cli")
    project, run_id = got
    table = [row for row in cli_bench.cases(project, run_id)
             if row[0] in ("python -c pass", "status RUN --json", "list --json",
                           "sync --json --session S")]
    walls, cpus, _ = cli_bench.interleaved(table, ctx.size(8, 2))
    bare = statistics.median(cpus["python -c pass"])
    out: Figures = {"`python -c pass` wall": (statistics.median(walls["python -c pass"]), "ms")}
    for name in ("status RUN --json", "list --json", "sync --json --session S"):
        out[f"`{name}` wall"] = (statistics.median(walls[name]), "ms")
        out[f"`{name}` CPU over `python -c pass`"] = (
            ratio(statistics.median(cpus[name]), bare), "x")
    return out
