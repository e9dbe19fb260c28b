"""Every benchmark in one command: each figure taken ``--repeat`` times, one table.

``python -m bench all`` runs the figures of every bench written so far
(store, engine, steps, worker start-up, host throughput at concurrency 1,
2 and 4, idle latency, ``kill -9`` recovery with the memory of workers held
in a node, ``watch`` latency, ``sync`` on a 10,000-run store, ``cancel``,
CLI start-up, Pi cold vs warm first token, and DBOS side by side when it is
installed) and prints one table: per figure the median, min and max over
the runs, its unit and how many runs gave it, with the machine's core
count, Python version, date and load average. ``--json`` prints the same
as one JSON object. The runs are interleaved (run 1 of every group, then
run 2, ...) so a busy spell of the machine lands on every figure rather
than on one. ``--quick`` shrinks every figure to finish in a couple of
minutes (a smoke check; its numbers are not worth quoting). Each group's
own bench (``python -m bench NAME``) prints the same figures in detail;
``bench/README.md`` explains each row. Nothing is asserted; a group that
fails in one run is noted and the others go on.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import all_hosts, all_local
from . import sync_bench as sync_module
from .all_ctx import Ctx, Figures, Skip
from .host_common import PROJECTS, comma_words, finish_bench, load_average

# group -> (collector, what it is); the order the groups run in within a run.
GROUPS: dict[str, tuple[Callable[[Ctx, int], Figures], str]] = {
    "store": (all_local.store, "store CAS writers vs bare SQLite commits, claim_next"),
    "engine": (all_local.engine, "node transition per fsync policy vs FULL commit, fsync"),
    "steps": (all_local.steps, "per-node time early vs late in one long run"),
    "boot": (all_hosts.boot, "worker start-up: zygote fork vs cold spawn, zygote memory"),
    "throughput": (all_hosts.throughput, "host runs/s and nodes/s at concurrency 1, 2, 4"),
    "latency": (all_hosts.latency, "queued -> first node_started, host idle"),
    "recovery": (all_hosts.recovery, "kill -9 of the host with runs in flight; memory"),
    "watch": (all_hosts.watch, "trace event appended -> line shown by `watch`"),
    "sync": (all_local.sync, "`sync` on a 10,000-run store"),
    "cancel": (all_hosts.cancel, "`cancel` while a node runs"),
    "cli": (all_local.cli, "CLI start-up vs `python -c pass`"),
    "agent": (all_hosts.agent, "Pi cold vs warm first token (scripted model)"),
    "peers": (all_hosts.peers, "DBOS Transact side by side (when installed)"),
}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench all", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="groups: " + ", ".join(GROUPS) + "\n\nexample: python -m bench all --repeat 3"
               "\n         python -m bench all --quick --only store,engine --json")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--json-file", type=Path, default=None, metavar="FILE",
                        help="also write the JSON object to FILE (the table still prints)")
    parser.add_argument("--repeat", type=int, default=3, metavar="K",
                        help="runs of every figure (default 3): median, min, max over them")
    parser.add_argument("--quick", action="store_true",
                        help="every figure small: a smoke check of a couple of minutes")
    parser.add_argument("--only", type=comma_words, default=[], help="comma list of groups")
    parser.add_argument("--skip", type=comma_words, default=[], help="comma list of groups")
    parser.add_argument("--timeout", type=float, default=120.0, help="deadline of each wait (s)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    unknown = [g for g in [*args.only, *args.skip] if g not in GROUPS]
    if unknown:
        parser.error(f"unknown group(s) {', '.join(unknown)}; known: {', '.join(GROUPS)}")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def collect(args: argparse.Namespace, ctx: Ctx, groups: list[str]) -> dict[str, Any]:
    """Every group ``args.repeat`` times, interleaved; progress on stderr."""
    values: dict[tuple[str, str], list[float]] = {}
    units: dict[tuple[str, str], str] = {}
    skipped: dict[str, str] = {}
    errors: list[str] = []
    for rnd in range(args.repeat):
        for name in groups:
            if name in skipped:
                continue
            began = time.monotonic()
            try:
                figures = GROUPS[name][0](ctx, rnd)
            except Skip as exc:
                skipped[name] = str(exc)
                print(f"[run {rnd + 1}/{args.repeat}] {name}: skipped: {exc}", file=sys.stderr)
                continue
            except Exception as exc:  # one group's failure must not lose the others
                errors.append(f"{name}, run {rnd + 1}: {type(exc).__name__}: {exc}"[:400])
                print(f"[run {rnd + 1}/{args.repeat}] {name}: ! {errors[-1]}", file=sys.stderr)
                continue
            for label, (value, unit) in figures.items():
                key = (name, label)
                units[key] = unit
                values.setdefault(key, [])
                if value is not None and math.isfinite(value):
                    values[key].append(float(value))
            print(f"[run {rnd + 1}/{args.repeat}] {name}: {time.monotonic() - began:.0f} s,"
                  f" load {load_average()}", file=sys.stderr, flush=True)
    rows = []
    for (group, label), got in values.items():
        rows.append({"group": group, "figure": label, "unit": units[(group, label)],
                     "median": statistics.median(got) if got else None,
                     "min": min(got) if got else None, "max": max(got) if got else None,
                     "runs": len(got), "values": got})
    return {"figures": rows, "skipped": skipped, "errors": errors}


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    size = abs(value)
    if size >= 1000:
        return f"{value:,.0f}"
    if size >= 100:
        return f"{value:.0f}"
    if size >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if size >= 0.1 else f"{value:.3f}"


def table(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [f"bench all: {report['options']['repeat']} run(s) per figure"
             f"{' (--quick)' if report['options']['quick'] else ''}; {m['cpus']} CPU(s),"
             f" Python {m['python']}, {m['date']}; load average {m['load_start']} at the start,"
             f" {m['load_end']} at the end; took {report['elapsed_s']:.0f} s",
             "", f"  {'figure':<66} {'median':>9} {'min':>9} {'max':>9} {'unit':<8} runs"]
    group = None
    for row in report["figures"]:
        if row["group"] != group:
            group = row["group"]
            lines.append(f"[{group}]")
        lines.append(f"  {row['figure']:<66} {fmt(row['median']):>9} {fmt(row['min']):>9}"
                     f" {fmt(row['max']):>9} {row['unit']:<8} {row['runs']:>4}")
    for name, why in report["skipped"].items():
        lines.append(f"[{name}] skipped: {why}")
    for line in report["errors"]:
        lines.append(f"  ! {line}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    groups = [g for g in GROUPS if (not args.only or g in args.only) and g not in args.skip]
    began = time.monotonic()
    start_load = load_average()
    base = Path(tempfile.mkdtemp(prefix="pi-wf-bench-all-"))
    ctx = Ctx(base, args.quick, args.repeat, args.timeout)
    # The benches' own notes (clean-up, a slow stop) go to stderr: stdout is the table.
    with contextlib.redirect_stdout(sys.stderr):
        print(f"bench all: groups {', '.join(groups)}; dir {base}")
        try:
            with ctx.stack:
                found = collect(args, ctx, groups)
        finally:
            finish_bench(PROJECTS + sync_module.PROJECTS, base, keep=args.keep, began=began)
    report = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(),
                    "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                    "load_start": start_load, "load_end": load_average()},
        "options": {"repeat": args.repeat, "quick": args.quick, "groups": groups},
        "elapsed_s": round(time.monotonic() - began, 1),
        **found,
    }
    if args.json_file is not None:
        args.json_file.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0
