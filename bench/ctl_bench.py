"""``python -m bench controllers``: controller workers under a real host (issue 24's figures).

Three figures, each in a scratch project of its own, with a real
``pi-workflows host`` process and its real controller workers (default 4,
``PI_WORKFLOWS_CONTROLLER_WORKERS``), the controller file written by the
bench:

1. **throughput**: 1,000 resources [quick: 40] of a controller that
   settles in one pass, applied in-process (``Store.apply_spec``, one
   transaction each, then one poke) into an idle host: reconciles per
   second from the first ``reconcile_started`` to the last ``settled``
   event. Beside it, the host's run throughput in nodes per second (the
   host bench's own ``host_throughput.throughput``: 100 [6] runs of a
   10-node chain at concurrency 4, ``fsync=node``), in the same bench
   run; goal: reconciles/s >= nodes/s.
2. **latency**: ``controller apply`` (the real CLI) -> first
   ``reconcile_started``, one resource at a time into an idle host (the
   previous one settled), 50 [5] samples: p50/p99 from the store's
   ``applied`` event and from the CLI's start; goal p50 and p99 <= 50 ms.
3. **recovery**: 100 [12] resources of a controller whose reconcile holds
   while a file exists; once every worker is mid-reconcile, ``kill -9`` of
   the host's process group (host and workers), the hold lifted, a new
   host started: new host ready (its lock's ``readyAt``) -> every key
   settled again; goal <= 1 s.

Every time comes from the store's controller events (``at``, epoch ms)
and the host's lock file; nothing here is asserted. ``--repeat N`` runs
each figure N times, interleaved (1, 2, 3, 1, 2, 3, ...).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import psutil
from pi_workflows.protocol.store import Store
from pi_workflows.protocol.wakeup import poke

from e2e.harness import Project, poll

from .host_common import (
    PROJECTS,
    bench_project,
    boot_clock_offset_s,
    children,
    finish_bench,
    load_average,
    pct,
    summary,
)
from .host_throughput import throughput

QUICK = """
from pi_workflows import define_controller


def reconcile(ctx, resource):
    return ctx.settled({"conditions": [{"type": "Ready", "status": "true", "reason": "Done"}]})


controller = define_controller(name="quick", initial_status=lambda spec: {}, reconcile=reconcile,
                               timeout=30)
"""

# Holds while ".hold" exists in the project (the worker's working directory),
# after marking itself busy: the bench kills the host once every worker is.
SLOW = """
import os
import time
from functools import partial
from pathlib import Path

from pi_workflows import define_controller


def reconcile(ctx, resource):
    key = resource.metadata.key
    Path(".busy").mkdir(exist_ok=True)
    Path(".busy", f"{key}.{os.getpid()}").write_text("")
    while Path(".hold").exists() and not ctx.cancelled():
        time.sleep(0.02)
    return ctx.settled({"conditions": [{"type": "Ready", "status": "true", "reason": "Done"}]})


controller = define_controller(name="slow", initial_status=lambda spec: {}, reconcile=reconcile,
                               timeout=120)
"""

GOAL_LATENCY_MS = 50.0
GOAL_RECOVERY_S = 1.0


def now_ms() -> int:
    return int(time.time() * 1000)


def ctl_project(base: Path, name: str, home: Path, controller: str, source: str,
                workers: int) -> Project:
    project = bench_project(base, name, home, "node")
    project.env["PI_WORKFLOWS_CONTROLLER_WORKERS"] = str(workers)
    wf = project.root / ".pi" / "workflows"
    wf.mkdir(parents=True, exist_ok=True)
    (wf / f"{controller}.controller.py").write_text(source)
    return project


def _events(store: Store, controller: str, after: int = 0) -> list[Any]:
    out: list[Any] = []
    seq = after
    while True:
        batch = store.controller_events_after(seq, controller=controller, limit=1000)
        if not batch:
            return out
        out.extend(batch)
        seq = batch[-1].seq


def _settled_keys(store: Store, controller: str, after: int = 0) -> dict[str, int]:
    return {e.key: e.at for e in _events(store, controller, after) if e.type == "settled"}


def _settled_at(store: Store, controller: str, after: int, key: str) -> int | None:
    return _settled_keys(store, controller, after).get(key)


def _workers_up(project: Project, store: Store, controller: str, timeout: float) -> bool:
    """The host's controller workers claim keys: one probe resource settles."""
    store.apply_spec(controller, "probe", {"probe": True})
    poke(project.paths.state_dir)
    if poll(lambda: "probe" in _settled_keys(store, controller), timeout, 0.02):
        return True
    for line in project.log_lines()[-15:]:
        print(f"    ! {line}")
    return False


# ---- 1. throughput -----------------------------------------------------------------


def reconcile_throughput(base: Path, home: Path, tag: str, resources: int, workers: int,
                         timeout: float, *, backlog: bool) -> dict[str, Any]:
    """``backlog``: every resource applied before the host starts (the workers' capacity);
    else applied one by one into the running, idle host (bound by the apply rate too)."""
    name = f"tp-{'backlog' if backlog else 'live'}-{tag}"
    project = ctl_project(base, name, home, "quick", QUICK, workers)
    out: dict[str, Any] = {"resources": resources, "workers": workers, "backlog": backlog}
    host = None
    try:
        with project.store() as store:
            after = store.last_controller_seq()
            if not backlog:
                host = project.start_host()
                if not _workers_up(project, store, "quick", timeout):
                    out["timeout"] = "the probe never settled"
                    return out
                after = store.last_controller_seq()
            begin = time.perf_counter()
            for i in range(resources):
                store.apply_spec("quick", f"r{i:05d}", {"i": i})
            poke(project.paths.state_dir)
            out["apply_s"] = time.perf_counter() - begin
            if host is None:
                host = project.start_host()
            done = poll(lambda: len(_settled_keys(store, "quick", after)) >= resources,
                        timeout, 0.1)
            events = _events(store, "quick", after)
        started = [e.at for e in events if e.type == "reconcile_started"]
        settled = [e.at for e in events if e.type == "settled"]
        if not done:
            out["timeout"] = f"{len({e.key for e in events if e.type == 'settled'})}" \
                             f"/{resources} settled"
        out["passes"] = len(started)
        if started and settled:
            elapsed = max(1, max(settled) - min(started)) / 1000
            out.update(elapsed_s=elapsed, per_s=len(settled) / elapsed)
    finally:
        if host is not None:
            project.stop_host(host)
        project.cleanup()
    return out


# ---- 2. latency --------------------------------------------------------------------


def apply_latency(base: Path, home: Path, tag: str, samples: int, workers: int,
                  timeout: float) -> dict[str, Any]:
    project = ctl_project(base, f"lat-{tag}", home, "quick", QUICK, workers)
    out: dict[str, Any] = {"from_event": [], "from_cli": [], "cli_ms": []}
    host = project.start_host()
    try:
        with project.store() as store:
            if not _workers_up(project, store, "quick", timeout):
                out["timeout"] = "the probe never settled"
                return out
            for i in range(samples):
                time.sleep(0.3)  # idle: the workers back waiting, no apply in flight
                after = store.last_controller_seq()
                key = f"k{i:03d}"
                begin = now_ms()
                project.cli("controller", "apply", "quick", key, "--spec-json",
                            json.dumps({"i": i}))
                cli_end = now_ms()
                got = poll(partial(_settled_at, store, "quick", after, key), timeout, 0.01)
                if not got:
                    out["timeout"] = f"sample {i} never settled"
                    break
                events = [e for e in _events(store, "quick", after) if e.key == key]
                applied = next(e.at for e in events if e.type == "applied")
                started = next(e.at for e in events if e.type == "reconcile_started")
                out["from_event"].append(float(started - applied))
                out["from_cli"].append(float(started - begin))
                out["cli_ms"].append(float(cli_end - begin))
    finally:
        project.stop_host(host)
        project.cleanup()
    return out


# ---- 3. recovery -------------------------------------------------------------------


def kill_recovery(base: Path, home: Path, tag: str, resources: int, workers: int,
                  timeout: float) -> dict[str, Any]:
    project = ctl_project(base, f"rec-{tag}", home, "slow", SLOW, workers)
    out: dict[str, Any] = {"resources": resources, "workers": workers}
    hold = project.root / ".hold"
    busy = project.root / ".busy"
    host = project.start_host(log="host1.log")
    new = None
    try:
        with project.store() as store:
            if not _workers_up(project, store, "slow", timeout):
                out["timeout"] = "the probe never settled"
                return out
            hold.write_text("")
            for i in range(resources):
                store.apply_spec("slow", f"r{i:05d}", {"i": i})
            poke(project.paths.state_dir)
            mid = poll(lambda: busy.exists() and len(list(busy.iterdir())) >= 1 + min(
                workers, resources), timeout, 0.02)
            out["mid_reconcile"] = len(list(busy.iterdir())) - 1 if busy.exists() else 0
            if not mid:
                out["timeout"] = f"only {out['mid_reconcile']} mid-reconcile"
            after = store.last_controller_seq()
            # The host and its controller workers (each leads its own process group,
            # and one whose host died finishes the reconcile in hand: kill them too).
            workers_pids = [p.pid for p in children(host.pid) if _is_ctl_worker(p)]
            os.killpg(host.pid, signal.SIGKILL)
            for pid in workers_pids:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
            host.wait()
            out["killed_workers"] = len(workers_pids)
            hold.unlink()
            kill_at = now_ms()
            new = project.start_host(log="host2.log")
            ready_at = int(new.lock.get("readyAt") or now_ms())
            out["host_startup_s"] = new.startup_s
            out["kill_to_ready_s"] = (ready_at - kill_at) / 1000
            keys = {f"r{i:05d}" for i in range(resources)}
            spawned = poll(lambda: _ctl_workers_created(new.pid), timeout, 0.01)
            done = poll(lambda: keys <= set(_settled_keys(store, "slow", after)), timeout, 0.02)
            settled = _settled_keys(store, "slow", after)
            events = _events(store, "slow", after)
            if not done:
                out["timeout"] = f"{len(keys & set(settled))}/{resources} settled after the kill"
            ats = [settled[k] for k in keys if k in settled]
            starts = [e.at for e in events if e.type == "reconcile_started" and e.key in keys]
            if ats:
                out["ready_to_all_s"] = (max(ats) - ready_at) / 1000
            if starts:
                out["ready_to_first_start_s"] = (min(starts) - ready_at) / 1000
            if spawned and starts:
                # The workers are cold-spawned processes: spawn -> first claim is their boot.
                out["ready_to_spawn_s"] = (min(spawned) - ready_at) / 1000
                out["spawn_to_first_start_s"] = (min(starts) - min(spawned)) / 1000
            gone = [e for e in events if e.type in ("requeued", "error")
                    and e.data.get("reason") == "runner_dead"]
            out["released"] = len(gone)
            if gone:
                out["released_vs_ready_s"] = (max(e.at for e in gone) - ready_at) / 1000
    finally:
        for h in (host, new):
            if h is not None and h.poll() is None:
                project.stop_host(h)
        project.cleanup()
    return out


def _ctl_workers_created(pid: int) -> list[int]:
    """Epoch ms each of the host's controller workers was created (psutil, 10 ms ticks)."""
    offset_ms = boot_clock_offset_s() * 1000
    out = []
    for proc in children(pid):
        try:
            if _is_ctl_worker(proc):
                out.append(round(proc.create_time() * 1000 + offset_ms))
        except psutil.Error:
            continue
    return out


def _is_ctl_worker(proc: psutil.Process) -> bool:
    try:
        return "--controllers" in proc.cmdline() or "controller" in " ".join(proc.cmdline())
    except psutil.Error:
        return False


# ---- printing ----------------------------------------------------------------------


def _goal(ok: bool) -> str:
    return "meets the goal" if ok else "MISSES the goal"


def print_throughput(rounds: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]
                     ) -> None:
    print("\n1. reconciles/s, resources that settle in one pass (goal: >= the host's nodes/s)")
    for backlog, live, host in rounds:
        nodes = host.get("nodes_per_s", float("nan"))
        for ctl, how in ((backlog, "applied before the host starts (capacity)"),
                         (live, "applied one by one into the idle host")):
            if ctl.get("timeout"):
                print(f"  ! {ctl['timeout']}")
            per_s = ctl.get("per_s", float("nan"))
            extra = f"; the applies took {ctl['apply_s']:.2f} s" if not ctl["backlog"] else ""
            print(f"  {ctl['resources']} resources {how}, {ctl['workers']} workers:"
                  f" {ctl.get('passes', 0)} passes in {ctl.get('elapsed_s', float('nan')):.2f} s"
                  f" -> {per_s:.1f} reconciles/s{extra}")
        print(f"  host run throughput: {host['runs']} runs x 10 nodes, concurrency"
              f" {host['concurrency']}: {nodes:.1f} nodes/s ({host['runs_per_s']:.2f} runs/s)")
        per_s = backlog.get("per_s", float("nan"))
        print(f"  reconciles/s (capacity) {per_s:.1f} vs nodes/s {nodes:.1f}: ratio"
              f" {per_s / nodes if nodes else float('nan'):.2f}x, {_goal(per_s >= nodes)}")


def print_latency(rounds: list[dict[str, Any]]) -> None:
    print("\n2. controller apply -> first reconcile_started, idle host (goal p50, p99 <= 50 ms)")
    for r in rounds:
        if r.get("timeout"):
            print(f"  ! {r['timeout']}")
        ev = r["from_event"]
        print(f"  applied event -> reconcile_started  {summary(ev)}")
        print(f"  CLI start -> reconcile_started      {summary(r['from_cli'])}")
        print(f"  the apply CLI's own wall time        {summary(r['cli_ms'])}")
        if ev:
            ok = pct(ev, 0.99) <= GOAL_LATENCY_MS
            print(f"  goal p50/p99 <= {GOAL_LATENCY_MS:.0f} ms (from the applied event):"
                  f" {_goal(ok)}")


def print_recovery(rounds: list[dict[str, Any]]) -> None:
    print("\n3. kill -9 of the host, resources mid-reconcile -> all settled"
          " (goal <= 1 s after the new host is ready)")
    for r in rounds:
        if r.get("timeout"):
            print(f"  ! {r['timeout']}")
        all_s = r.get("ready_to_all_s")
        print(f"  {r['resources']} resources, {r['workers']} workers,"
              f" {r.get('mid_reconcile', 0)} mid-reconcile at the kill (host and"
              f" {r.get('killed_workers', 0)} workers killed):"
              f" new host start-up {r.get('host_startup_s') or float('nan'):.2f} s,"
              f" ready -> first reconcile_started"
              f" {r.get('ready_to_first_start_s', float('nan')):.2f} s,"
              f" (ready -> first worker spawned {r.get('ready_to_spawn_s', float('nan')):.2f} s,"
              f" spawned -> its first reconcile_started"
              f" {r.get('spawn_to_first_start_s', float('nan')):.2f} s),"
              f" ready -> all settled {all_s if all_s is not None else float('nan'):.2f} s;"
              f" {_goal(all_s is not None and all_s <= GOAL_RECOVERY_S)};"
              f" the dead workers' keys returned (runner_dead) {r.get('released', 0)}"
              + ("" if r.get("released_vs_ready_s") is None else
                 f", the last {r['released_vs_ready_s']:+.2f} s from ready"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench controllers",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke-sized configuration")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each figure, interleaved")
    parser.add_argument("--resources", type=int, help="figure 1's resources (1,000)")
    parser.add_argument("--samples", type=int, help="figure 2's samples (50)")
    parser.add_argument("--recover", type=int, help="figure 3's resources (100)")
    parser.add_argument("--workers", type=int, default=4, help="controller workers (4)")
    parser.add_argument("--only", default="throughput,latency,recovery")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    unknown = only - {"throughput", "latency", "recovery"}
    if unknown:
        print(f"unknown figure(s) {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    resources = args.resources or (40 if args.quick else 1000)
    samples = args.samples or (5 if args.quick else 50)
    recover = args.recover or (12 if args.quick else 100)
    host_runs = 6 if args.quick else 100
    began = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="bench-ctl-"))
    home = base / "home"
    home.mkdir()
    print(f"controllers bench: {os.cpu_count()} cores, load average {load_average()}")
    tp: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = []
    lat: list[dict[str, Any]] = []
    rec: list[dict[str, Any]] = []
    try:
        for n in range(args.repeat):
            round_dir = base / f"round{n}"  # the host bench's project names are fixed
            round_dir.mkdir()
            if "throughput" in only:
                backlog = reconcile_throughput(base, home, f"{n}", resources, args.workers,
                                               args.timeout, backlog=True)
                host = throughput(round_dir, home, "node", 4, host_runs, 10, args.timeout)
                live = reconcile_throughput(base, home, f"{n}", resources, args.workers,
                                            args.timeout, backlog=False)
                tp.append((backlog, live, host))
            if "latency" in only:
                lat.append(apply_latency(base, home, f"{n}", samples, args.workers,
                                         args.timeout))
            if "recovery" in only:
                rec.append(kill_recovery(base, home, f"{n}", recover, args.workers,
                                         args.timeout))
        if tp:
            print_throughput(tp)
        if lat:
            print_latency(lat)
        if rec:
            print_recovery(rec)
    finally:
        finish_bench(PROJECTS, base, keep=args.keep, began=began)
    return 0
