"""`python -m bench controllers --quick` runs its three figures and prints each line.

No figure is judged (a benchmark is not a test; nothing here looks at a time):
this only proves the bench still drives a real host and its controller
workers end to end, in a subprocess, prints every figure beside its goal with
no timed-out wait, and removes its temporary directory. An unknown figure is
refused with one line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def bench_ctl(tmp_path: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench", "controllers", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "TMPDIR": str(tmp_path)})


@pytest.mark.slow  # real hosts and controller workers, a kill -9
@pytest.mark.timeout(300)
def test_quick_prints_every_figure_and_cleans_up(tmp_path: Path) -> None:
    done = bench_ctl(tmp_path, "--quick", "--samples", "2", "--recover", "6", timeout=280)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert " ! " not in out and "no samples" not in out and "nan" not in out, out
    for line in ("applied before the host starts (capacity)",
                 "applied one by one into the idle host", "reconciles/s (capacity)",
                 "host run throughput:",
                 "applied event -> reconcile_started  p50", "CLI start -> reconcile_started",
                 "goal p50/p99 <= 50 ms", "mid-reconcile at the kill (host and",
                 "ready -> all settled", "leftover processes killed at the end: 0"):
        assert line in out, (line, out)
    assert list(tmp_path.iterdir()) == []  # its temporary directory is removed


@pytest.mark.timeout(60)
def test_an_unknown_figure_is_refused_with_one_line(tmp_path: Path) -> None:
    done = bench_ctl(tmp_path, "--only", "latency,nope", timeout=50)
    assert done.returncode == 2 and done.stdout == ""
    assert "unknown figure(s) nope" in done.stderr and "Traceback" not in done.stderr
