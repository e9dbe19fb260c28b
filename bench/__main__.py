"""``python -m bench NAME [ARGS...]``: run one benchmark by name."""

from __future__ import annotations

import importlib
import sys

# name -> (module, one-line description); each module has main(argv) -> int.
BENCHES: dict[str, tuple[str, str]] = {
    "all": ("bench.all_bench",
            "every figure below, each the median of --repeat runs, in one table (--json)"),
    "store": ("bench.store_bench",
              "store CAS transitions/s (NORMAL vs FULL vs bare SQLite), claim_next latency"),
    "engine": ("bench.engine_bench",
               "one node transition per fsync policy vs a bare FULL commit and append+fsync"),
    "steps": ("bench.steps_bench",
              "per-node transition time at step 10 / 1,000 / 10,000 of a loop and a chain"),
    "host": ("bench.host_bench",
             "worker boot, host throughput, queued->node latency, kill -9 recovery, RSS"),
    "sync": ("bench.sync_bench",
             "session catch-up on a 10,000-run store, feed -> `sync --follow` line latency"),
    "watch": ("bench.watch_bench",
              "trace event appended -> its line shown by `pi-workflows watch RUN --json`"),
    "cancel": ("bench.cancel_bench",
               "`cancel` -> run cancelled while a node runs (default renewal), p50 goal < 1 s"),
    "peers": ("bench.peers_bench",
              "DBOS Transact vs one host, interleaved: workflows/s, latency, kill -9 recovery"),
    "agent": ("bench.agent_bench",
              "agent steps in the real Pi: cold vs warmed start, bridge overhead per step, RSS"),
    "piext": ("bench.piext_bench",
              "the Pi extension in a real Pi: end of turn -> first node, footer lag, CLI calls"),
    "controllers": ("bench.ctl_bench",
                    "reconciles/s vs host nodes/s, apply -> reconcile p50/p99,"
                    " kill -9 -> all back"),
    "view": ("bench.view_bench",
             "view stream and dashboard: event -> shown p50, 10,000-run list paint, CPU"),
    "cli": ("bench.cli_bench",
            "CLI start-up: status/list/sync --json, run --detach, --help vs python -c pass"),
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "list"):
        print("usage: python -m bench NAME [ARGS...]\n\nbenchmarks:")
        for name, (_, about) in BENCHES.items():
            print(f"  {name:<10} {about}")
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in BENCHES:
        print(f"unknown benchmark {name!r}; try: {', '.join(BENCHES)}", file=sys.stderr)
        return 2
    module = importlib.import_module(BENCHES[name][0])
    result: int = module.main(rest)
    return result


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
