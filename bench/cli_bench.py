"""Command-line start-up benchmark (issue 12 section 3): each command next to ``python -c pass``.

Times whole ``python -m pi_workflows ...`` subprocesses, as the Pi extension
and scripts call them, against a bare ``python -c pass`` of the same
interpreter in the same run: wall time (spawn to reaped) and CPU time (user +
system of the child, from ``wait4``). The commands run interleaved, one of
each per round, so a noisy neighbour slows all of them alike; the figure to
read is the ratio of medians to ``python -c pass`` (goal: at most 2.5x for
``status RUN --json``, ``list --json`` and ``sync --json``; ``--help`` may be
slower).

The project is a throw-away one (``e2e.harness.Project``): a three-node
compute workflow with a few runs executed in this terminal (``run``), so
``status`` and ``list`` read real bundles. ``run --detach`` queues a run
each round (no host runs; the command says so on stderr), and ``sync`` uses
one session throughout; a last pair of rows times ``sync --json`` while a
host runs (proving it alive loads psutil). ``--fast-off`` also times every command with
``PI_WORKFLOWS_NO_FAST_CLI=1`` (the full typer path), for the before/after.
The children run without ``PYTHONDONTWRITEBYTECODE`` (an installed package
has its bytecode). Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pi_workflows.protocol.states import TERMINAL

from e2e.harness import Project, clean_env, poll

CHAIN = """
from pi_workflows import compute, define_workflow, edge

workflow = define_workflow(
    start_at="a",
    nodes=[compute("a", lambda ctx: {"n": 1}), compute("b", lambda ctx: {"n": 2}),
           compute("c", lambda ctx: {"n": 3})],
    edges=[edge("a", "b"), edge("b", "c")],
)
"""


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall ms, CPU ms, exit code) of one subprocess, its output discarded."""
    began = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - began) * 1000
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return wall, (usage.ru_utime + usage.ru_stime) * 1000, proc.returncode


def cases(project: Project, run_id: str) -> list[tuple[str, list[str], dict[str, str]]]:
    py = [sys.executable]
    cli = [*py, "-m", "pi_workflows"]
    where = ["--project", str(project.root)]
    plain = project.env
    typer_path = {**plain, "PI_WORKFLOWS_NO_FAST_CLI": "1"}
    base = [
        ("status RUN --json", [*cli, "status", run_id, "--json", *where]),
        ("list --json", [*cli, "list", "--json", *where]),
        ("sync --json --session S", [*cli, "sync", "--json", "--session", "bench-1", *where]),
        ("run --detach --json", [*cli, "run", "chain", "--detach", "--json", *where]),
        ("--help", [*cli, "--help"]),
    ]
    out = [("python -c pass", [*py, "-c", "pass"], plain)]
    out += [(name, argv, plain) for name, argv in base]
    if FAST_OFF:
        out += [(f"{name}  [typer]", argv, typer_path) for name, argv in base]
    return out


FAST_OFF = False


def with_host(project: Project, samples: int) -> None:
    """``sync --json`` while a host runs: telling it is alive loads psutil."""
    cli = [sys.executable, "-m", "pi_workflows", "sync", "--json", "--session", "bench-2",
           "--project", str(project.root)]
    bare = [sys.executable, "-c", "pass"]
    host = project.start_host()
    try:
        with project.store() as store:  # the queued runs finish first: a quiet host
            settled = poll(lambda: all(r.state in TERMINAL for r in store.list_runs()), 120)
        if not settled:
            print("  ! the host did not finish the queued runs in 120 s; timing anyway")
        rows: dict[str, list[tuple[float, float, int]]] = {"python -c pass": [],
                                                           "sync --json (a host runs)": []}
        for _ in range(samples):
            rows["python -c pass"].append(timed(bare, project.env))
            rows["sync --json (a host runs)"].append(timed(cli, project.env))
    finally:
        project.stop_host(host)
    base = statistics.median(r[1] for r in rows["python -c pass"])
    for name, got in rows.items():
        cpu = statistics.median(r[1] for r in got)
        print(f"  {name:<32} {statistics.median(r[0] for r in got):8.1f} {cpu:8.1f}"
              f" {'':>7} {cpu / base:6.2f}x")


def make_project(base: Path) -> tuple[Project, str]:
    """A throw-away project under ``base`` with three runs done; (project, last run id)."""
    root = base / "project"
    root.mkdir()
    env = clean_env(base / "home")
    # An installed package has its bytecode; without it every module is
    # compiled from source on every start, which is not what users see.
    if env.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        print("(PYTHONDONTWRITEBYTECODE is set here: the commands timed run without it)",
              file=sys.stderr)
    project = Project(root, env)
    project.write_workflow("chain", CHAIN)
    run_id = ""
    for _ in range(3):
        done = project.cli("run", "chain", "--json")
        run_id = str(json.loads(done.stdout)["runId"])
    return project, run_id


Table = list[tuple[str, list[str], dict[str, str]]]


def interleaved(table: Table, samples: int) -> tuple[dict[str, list[float]],
                                                     dict[str, list[float]],
                                                     dict[str, set[int]]]:
    """One warm-up each, then ``samples`` rounds of one of each: (walls, CPUs, exit codes)."""
    walls: dict[str, list[float]] = {name: [] for name, _, _ in table}
    cpus: dict[str, list[float]] = {name: [] for name, _, _ in table}
    codes: dict[str, set[int]] = {name: set() for name, _, _ in table}
    for _, cmd, env in table:  # one warm-up each: page cache, .pyc files
        timed(cmd, env)
    for _ in range(samples):
        for name, cmd, env in table:
            wall, cpu, code = timed(cmd, env)
            walls[name].append(wall)
            cpus[name].append(cpu)
            codes[name].add(code)
    return walls, cpus, codes


def main(argv: list[str]) -> int:
    global FAST_OFF
    parser = argparse.ArgumentParser(prog="python -m bench cli", description=__doc__)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--fast-off", action="store_true",
                        help="also time each command on the full typer path")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    FAST_OFF = args.fast_off
    base = Path(tempfile.mkdtemp(prefix="pwf-bench-cli-"))
    try:
        project, run_id = make_project(base)
        table = cases(project, run_id)
        walls, cpus, codes = interleaved(table, args.samples)
        bare_wall = statistics.median(walls["python -c pass"])
        bare_cpu = statistics.median(cpus["python -c pass"])
        print(f"command-line start-up: median of {args.samples} interleaved runs"
              f" (load average {os.getloadavg()[0]:.2f})")
        print(f"  {'command':<32} {'wall ms':>8} {'CPU ms':>8} {'wall x':>7} {'CPU x':>7}")
        for name, _, _ in table:
            wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
            bad = "" if codes[name] <= {0} else f"  (exit {sorted(codes[name])})"
            print(f"  {name:<32} {wall:8.1f} {cpu:8.1f} {wall / bare_wall:6.2f}x"
                  f" {cpu / bare_cpu:6.2f}x{bad}")
        print("  goal: status/list/sync --json at most 2.5x `python -c pass`")
        with_host(project, args.samples)
    finally:
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    return 0
