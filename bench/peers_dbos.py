"""The peer bench's DBOS side, driven from the bench process: each figure is one subprocess.

Owns knowing whether DBOS is installed (without importing it), launching
``bench.peers_dbos_app`` for throughput, latency and the ``kill -9``
drill (kill the process running the queue worker with 20 workflows in a
blocking step, start a new one on the same SQLite file, and time until
all 20 have started their step again in the new process, from the
step-start marks file), and returning plain figures. Never imports
``dbos``; imports ``e2e.harness`` (``poll``, a wait with a deadline).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from e2e.harness import poll

INSTALL = ("DBOS is not installed: the peer side is skipped. Install it with\n"
           "  .venv/bin/python -m pip install -e '.[bench]'   (or: pip install dbos)")
APP = "bench.peers_dbos_app"


def available() -> bool:
    return importlib.util.find_spec("dbos") is not None


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("dbos")
    except PackageNotFoundError:
        return "missing"


def _spawn(mode: str, db: Path, *args: str) -> subprocess.Popen[str]:
    # Its own session: a kill -9 of it is the kill of one process we own.
    return subprocess.Popen([sys.executable, "-m", APP, mode, "--db", str(db), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, cwd=Path(__file__).resolve().parent.parent)


def _finish(proc: subprocess.Popen[str], timeout: float) -> tuple[list[dict[str, Any]], str]:
    """Its JSON lines and stderr tail, killing it after ``timeout``."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        out, err = proc.communicate()
        err += f"\n(killed after {timeout:g} s)"
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    return lines, err[-800:]


def _kill(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _common(journal: str, concurrency: int, poll_s: float) -> list[str]:
    return ["--journal", journal, "--concurrency", str(concurrency), "--poll", str(poll_s)]


def throughput(base: Path, journal: str, runs: int, steps: int, concurrency: int,
               poll_s: float, timeout: float) -> dict[str, Any]:
    """Runs/s from the first enqueue to the last workflow's last step."""
    base.mkdir(parents=True, exist_ok=True)
    proc = _spawn("throughput", base / f"tp-{journal}.sqlite", "--runs", str(runs),
                  "--steps", str(steps), *_common(journal, concurrency, poll_s))
    lines, err = _finish(proc, timeout)
    got = next((x for x in lines if x.get("event") == "throughput"), None)
    if got is None:
        return {"error": f"exit {proc.returncode}: {err.strip()}", "runs_per_s": float("nan")}
    return {"runs_per_s": runs / got["elapsed_s"], "elapsed_s": got["elapsed_s"],
            "enqueue_s": got["enqueue_s"]}


def latency(base: Path, journal: str, samples: int, steps: int, poll_s: float,
            timeout: float) -> dict[str, Any]:
    """enqueue -> first step start (ms), one workflow at a time into an idle queue."""
    base.mkdir(parents=True, exist_ok=True)
    proc = _spawn("latency", base / f"lat-{journal}.sqlite", "--samples", str(samples),
                  "--steps", str(steps), *_common(journal, 0, poll_s))
    lines, err = _finish(proc, timeout + samples * (poll_s + 1))
    got = next((x for x in lines if x.get("event") == "latency"), None)
    if got is None:
        return {"error": f"exit {proc.returncode}: {err.strip()}", "first_ms": []}
    return {"first_ms": [s["first_ms"] for s in got["samples"]],
            "done_ms": [s["done_ms"] for s in got["samples"]]}


def _marks(path: Path, pid: int) -> dict[str, float]:
    """workflow id -> its step's first start in process ``pid``."""
    out: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == str(pid):
                out.setdefault(parts[1], float(parts[2]))
    return out


def _all_marks(path: Path, pid: int, runs: int) -> dict[str, float] | None:
    got = _marks(path, pid)
    return got if len(got) >= runs else None


def recovery(base: Path, journal: str, runs: int, poll_s: float,
             timeout: float) -> dict[str, Any]:
    """kill -9 of the process with ``runs`` workflows in their step -> all back in it."""
    base.mkdir(parents=True, exist_ok=True)
    db, marks, release = (base / f"rec-{journal}.sqlite", base / "marks", base / "release")
    extra = ["--runs", str(runs), "--marks", str(marks), "--release", str(release),
             *_common(journal, 0, poll_s)]
    out: dict[str, Any] = {"running_s": float("nan"), "from_start_s": float("nan")}
    first = _spawn("hold", db, *extra)
    second: subprocess.Popen[str] | None = None
    try:
        if not poll(lambda: len(_marks(marks, first.pid)) >= runs, timeout, 0.02):
            out["error"] = f"only {len(_marks(marks, first.pid))}/{runs} reached the step"
            return out
        killed = time.time()
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        started = time.time()
        second = _spawn("recover", db, *extra)
        pid = second.pid
        back = poll(lambda: _all_marks(marks, pid, runs), timeout, 0.02)
        if not back:
            out["error"] = f"only {len(_marks(marks, pid))}/{runs} back in their step"
            return out
        out["running_s"] = max(back.values()) - killed
        out["from_start_s"] = max(back.values()) - started
        out["first_back_s"] = min(back.values()) - killed
    finally:
        release.write_text("go\n")
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    _kill(proc)
            if proc is not None:
                with contextlib.suppress(OSError):
                    proc.communicate(timeout=5)
    return out
