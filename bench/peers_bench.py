"""Peer bench (issue 12): the same workload on DBOS Transact and on pi-workflows, one run.

Workload: ``--runs`` workflows of ``--steps`` trivial steps (200 x 10).

- DBOS Transact (the optional ``bench`` extra) on a SQLite system
  database with one queue: ``dbos-wal`` (WAL, ``synchronous=NORMAL``) and
  ``dbos-default`` (DBOS's own settings: rollback journal, FULL), each in
  its own process (``bench.peers_dbos_app``) on a fresh database file;
  DBOS's default queue settings (no concurrency limit, 1 s polling)
  unless ``--dbos-concurrency`` / ``--dbos-poll`` say otherwise.
- pi-workflows through one real ``pi-workflows host`` at concurrency 2
  and 4 (``pi-c2``, ``pi-c4``), default settings, a fresh project each.

Figures, per variant and round: throughput (workflows/s, first enqueue
to last workflow done), idle latency enqueue -> first step start (ms,
one workflow at a time), and recovery: ``--recovery-runs`` workflows
blocked in their first step, ``kill -9`` of the process running them
(the host; for DBOS the process running its queue worker), a new one
started at once, seconds until all are back in their step.

The sides alternate (ABAB: dbos-wal, pi-c2, dbos-default, pi-c4, then
latency DBOS, pi, then recovery DBOS, pi) and the whole sequence repeats
``--rounds`` times; the summary gives min/median/max over rounds per
variant and the pi/DBOS ratio as the median of the per-round ratios
(neighbours in time, so a slow spell divides out) and as the ratio of the
medians. Nothing is asserted. Without DBOS installed it says how to
install it and measures the pi-workflows side only (exit 0).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import peers_dbos, peers_pi
from .host_common import PROJECTS, comma_words, finish_bench, load_average
from .peers_stats import fmt_spread, median_ratio, paired_ratios, schedule, spread

DBOS_TP = ["dbos-wal", "dbos-default"]
PI_TP = ["pi-c2", "pi-c4"]
LABEL = {"dbos-wal": "DBOS, SQLite queue, WAL + NORMAL",
         "dbos-default": "DBOS, SQLite queue, default journal",
         "pi-c2": "pi-workflows host, concurrency 2",
         "pi-c4": "pi-workflows host, concurrency 4",
         "dbos": "DBOS, SQLite queue, WAL + NORMAL", "pi": "pi-workflows host"}
PHASES = ("throughput", "latency", "recovery")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench peers", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="example: python -m bench peers --rounds 3")
    parser.add_argument("--rounds", type=int, default=3, help="repeats of the ABAB sequence")
    parser.add_argument("--runs", type=int, default=200, help="workflows per throughput figure")
    parser.add_argument("--steps", type=int, default=10, help="trivial steps per workflow")
    parser.add_argument("--latency-samples", type=int, default=20)
    parser.add_argument("--recovery-runs", type=int, default=20)
    parser.add_argument("--fsync", default="node", help="pi-workflows fsync policy")
    parser.add_argument("--dbos-concurrency", type=int, default=0,
                        help="DBOS queue worker_concurrency (0: its default, no limit)")
    parser.add_argument("--dbos-poll", type=float, default=1.0,
                        help="DBOS queue polling_interval_sec (its default 1.0)")
    parser.add_argument("--skip", type=comma_words, default=[],
                        help="phases to skip: throughput,latency,recovery")
    parser.add_argument("--pi-only", action="store_true", help="leave DBOS out")
    parser.add_argument("--timeout", type=float, default=180.0, help="deadline of each wait (s)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    return parser.parse_args(argv)


Figures = dict[str, dict[str, dict[int, Any]]]  # phase -> variant -> round -> result


def _measure(args: argparse.Namespace, base: Path, home: Path, phase: str, variant: str,
             rnd: int) -> dict[str, Any]:
    where = base / f"r{rnd}" / f"{phase}-{variant}"
    dbos = variant.startswith("dbos")
    if phase == "throughput":
        if dbos:
            return peers_dbos.throughput(where, variant.removeprefix("dbos-"), args.runs,
                                         args.steps, args.dbos_concurrency, args.dbos_poll,
                                         args.timeout)
        return peers_pi.throughput(where, home, args.fsync, int(variant.removeprefix("pi-c")),
                                   args.runs, args.steps, args.timeout)
    if phase == "latency":
        if dbos:
            return peers_dbos.latency(where, "wal", args.latency_samples, args.steps,
                                      args.dbos_poll, args.timeout)
        return peers_pi.latency(where, home, args.fsync, args.latency_samples, args.steps,
                                args.timeout)
    if dbos:
        return peers_dbos.recovery(where, "wal", args.recovery_runs, args.dbos_poll,
                                   args.timeout)
    return peers_pi.recovery(where, home, args.fsync, args.recovery_runs, args.timeout)


def _median(values: list[float]) -> float:
    return spread(values)[1]


def _line(phase: str, r: dict[str, Any]) -> str:
    if phase == "throughput":
        text = f"{r['runs_per_s']:.2f} workflows/s"
    elif phase == "latency":
        text = f"enqueue -> first step p50 {_median(r['first_ms']):.0f} ms"
    else:
        text = (f"kill -9 -> all back {r['running_s']:.2f} s (new process start -> all back"
                f" {r['from_start_s']:.2f} s)")
    return text + (f"  ! {r['error']}" if r.get("error") else "")


def run_rounds(args: argparse.Namespace, base: Path, home: Path, with_dbos: bool) -> Figures:
    figures: Figures = {p: {} for p in PHASES}
    a = DBOS_TP if with_dbos else []
    steps: list[tuple[int, str, str]] = []
    for rnd, variant in schedule(a, PI_TP, args.rounds):
        steps.append((rnd, "throughput", variant))
        if variant == PI_TP[-1]:  # the round's throughput pairs are done
            for phase in ("latency", "recovery"):
                steps += [(rnd, phase, v) for v in (["dbos"] if with_dbos else []) + ["pi"]]
    for rnd, phase, variant in steps:
        if phase in args.skip:
            continue
        began = time.monotonic()
        result = _measure(args, base, home, phase, variant, rnd)
        figures[phase].setdefault(variant, {})[rnd] = result
        print(f"  round {rnd + 1} {phase:<10} {variant:<12} {_line(phase, result)}"
              f"  [{time.monotonic() - began:.0f} s, load {load_average()}]", flush=True)
    return figures


def _per_round(figures: Figures, phase: str, variant: str,
               pick: Callable[[dict[str, Any]], float]) -> dict[int, float]:
    return {rnd: pick(r) for rnd, r in figures[phase].get(variant, {}).items()}


def _ratios(title: str, x: dict[int, float], y: dict[int, float], better: str) -> None:
    if not x or not y:
        return
    paired = paired_ratios(x, y)
    lo, mid, hi = spread(paired)
    whole = median_ratio(list(x.values()), list(y.values()))
    print(f"    {title}: {mid:.2f}x (per round {lo:.2f}..{hi:.2f}, ratio of medians"
          f" {whole:.2f}x; {better})")


def report(args: argparse.Namespace, figures: Figures) -> None:
    print(f"\nsummary over {args.rounds} round(s): min / median / max of the per-round figures")
    tp = figures["throughput"]
    if tp:
        print(f"  throughput, {args.runs} workflows x {args.steps} steps (workflows/s):")
        rates = {v: _per_round(figures, "throughput", v, lambda r: r["runs_per_s"]) for v in tp}
        for v, per in rates.items():
            print(f"    {LABEL[v]:<38} {fmt_spread(list(per.values()))}")
        for p in PI_TP:
            for d in DBOS_TP:
                if p in rates and d in rates:
                    _ratios(f"{p} / {d}", rates[p], rates[d], "above 1: pi-workflows faster")
    if figures["latency"]:
        print(f"  idle latency enqueue -> first step start, {args.latency_samples} samples a"
              " round (ms; per-round p50):")
        lat = {v: _per_round(figures, "latency", v, lambda r: _median(r["first_ms"]))
               for v in figures["latency"]}
        for v, per in lat.items():
            pooled = [x for r in figures["latency"][v].values() for x in r["first_ms"]]
            print(f"    {LABEL[v]:<38} {fmt_spread(list(per.values()), 'ms', 0)};"
                  f" all samples p50 {_median(pooled):.0f} ms")
        if "pi" in lat and "dbos" in lat:
            _ratios("pi / DBOS", lat["pi"], lat["dbos"], "below 1: pi-workflows quicker")
    if figures["recovery"]:
        print(f"  recovery, kill -9 with {args.recovery_runs} in their step -> all back (s):")
        rec = {v: _per_round(figures, "recovery", v, lambda r: r["running_s"])
               for v in figures["recovery"]}
        for v, per in rec.items():
            fresh = [r["from_start_s"] for r in figures["recovery"][v].values()]
            print(f"    {LABEL[v]:<38} {fmt_spread(list(per.values()), 's')};"
                  f" from the new process's start: median {_median(fresh):.2f} s")
        if "pi" in rec and "dbos" in rec:
            _ratios("pi / DBOS", rec["pi"], rec["dbos"], "below 1: pi-workflows quicker")
    errors = [f"{p} {v} round {rnd + 1}: {r['error']}" for p, per in figures.items()
              for v, rounds in per.items() for rnd, r in rounds.items() if r.get("error")]
    for line in errors:
        print(f"  ! {line}")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    began = time.monotonic()
    with_dbos = not args.pi_only and peers_dbos.available()
    if not with_dbos and not args.pi_only:
        print(peers_dbos.INSTALL)
    base = Path(tempfile.mkdtemp(prefix="pi-wf-peers-bench-"))
    home = base / "home"
    dbos = f"DBOS {peers_dbos.version()}" if with_dbos else "no DBOS"
    print(f"peers bench: python {sys.version.split()[0]}, {os.cpu_count()} CPU(s), {dbos},"
          f" load average {load_average()}; dir {base}")
    if with_dbos:
        print(f"  DBOS queue: worker_concurrency {args.dbos_concurrency or 'default (none)'},"
              f" polling_interval_sec {args.dbos_poll:g}; pi-workflows fsync={args.fsync}")
    try:
        figures = run_rounds(args, base, home, with_dbos)
        report(args, figures)
    finally:
        finish_bench(PROJECTS, base, keep=args.keep, began=began)
    return 0
