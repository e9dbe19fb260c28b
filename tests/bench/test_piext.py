"""`python -m bench piext --quick` runs its scenarios in a real Pi and prints every figure.

No figure is judged (a benchmark is not a test; nothing here looks at a time):
this only proves the command still drives the real pinned Pi with the
extension end to end, in a subprocess, prints a line for each figure and its
breakdown with no timed-out wait, and removes its temporary directory, so the
bench cannot rot unnoticed. An unknown scenario is refused with one line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def bench_piext(tmp_path: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench", "piext", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "TMPDIR": str(tmp_path)})


@pytest.mark.slow  # a real Pi, a host and session runners
@pytest.mark.timeout(240)
def test_quick_prints_every_figure_and_cleans_up(tmp_path: Path) -> None:
    done = bench_piext(tmp_path, "--quick", timeout=200)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert " ! " not in out and "no samples" not in out, out  # no wait ran out
    for line in ("agent_end -> first node_started", "status --nodes (wall)",
                 "activate exec'd -> its runner row", "run_started -> node_started",
                 "host resumes: running -> footer running",
                 "run --session elsewhere: done -> footer completed",
                 "prompt sent -> first text delta", "idle turn, no unfinished run:",
                 "turn with a run unfinished", "activate --session NOBODY",
                 "mean wall time per kind of call", "goal p50 <= 300 ms",
                 "goal p50 <= 2000 ms", "leftover processes killed at the end:"):
        assert line in out, (line, out)
    assert list(tmp_path.iterdir()) == []  # its temporary directory is removed


@pytest.mark.timeout(60)
def test_an_unknown_scenario_is_refused_with_one_line(tmp_path: Path) -> None:
    done = bench_piext(tmp_path, "--only", "turn,nope", timeout=50)
    assert done.returncode == 2 and done.stdout == ""
    assert "unknown scenario(s) nope" in done.stderr and "Traceback" not in done.stderr
