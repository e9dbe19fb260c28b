"""`python -m bench all` keeps running its benches and printing one well-formed report.

No figure is judged (a benchmark is not a test): this only proves the command
still runs real measurements end to end, in a subprocess, and reports each
figure as the median, min and max of its runs with the machine's details, so
the command cannot rot unnoticed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs real benches in subprocesses

REPO = Path(__file__).resolve().parents[2]


def bench_all(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench", "all", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TMPDIR": str(tmp_path)})


@pytest.mark.timeout(150)
def test_quick_json_reports_every_figure_of_the_chosen_groups(tmp_path: Path) -> None:
    done = bench_all(tmp_path, "--quick", "--json", "--only", "store,engine", "--repeat", "2")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # stdout is exactly one JSON object
    machine = report["machine"]
    assert isinstance(machine["cpus"], int) and machine["cpus"] >= 1
    assert machine["python"].count(".") == 2 and "UTC" in machine["date"]
    assert report["options"] == {"repeat": 2, "quick": True, "groups": ["store", "engine"]}
    assert report["errors"] == [] and report["skipped"] == {}
    figures = {(f["group"], f["figure"]): f for f in report["figures"]}
    for key in [("engine", f"node transition, fsync={p}") for p in ("always", "node", "never")] + [
            ("engine", "bare SQLite commit, WAL, synchronous=FULL"),
            ("engine", "append one line + fsync, plain file"),
            ("store", "store CAS transitions/s, synchronous=NORMAL")]:
        assert key in figures, sorted(figures)
    assert {g for g, _ in figures} == {"store", "engine"}
    for f in figures.values():
        assert f["runs"] == 2 == len(f["values"]), f
        assert f["min"] <= f["median"] <= f["max"], f
        assert f["min"] == min(f["values"]) and f["max"] == max(f["values"])
        assert f["unit"] in {"ms", "/s", "x"}, f
    assert list(tmp_path.iterdir()) == []  # its temporary directory is removed


@pytest.mark.timeout(60)
def test_an_unknown_group_is_refused_with_one_line(tmp_path: Path) -> None:
    done = bench_all(tmp_path, "--only", "store,nope")
    assert done.returncode == 2 and done.stdout == ""
    assert "unknown group(s) nope" in done.stderr and "Traceback" not in done.stderr
