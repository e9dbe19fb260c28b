"""The package builds without a warning, and the wheel holds the whole source tree.

The three top-level folders install under one name through ``package-dir``,
so setuptools cannot find packages by itself: ``pyproject.toml`` lists every
one. A package left off that list still imports from an editable install
(whose finder maps folders, not packages) and is silently missing from a
wheel; a data folder left off makes the build print a page of warnings. The
wheel is built here with the backend itself, in a copy of the tree (nothing
is written into the checkout, nothing is fetched).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {"authoring": "pi_workflows", "protocol": "pi_workflows/protocol",
           "worker": "pi_workflows/worker", "supervisor": "pi_workflows/supervisor"}
DATA_SUFFIXES = (".ts", ".js", ".css")  # the Pi extension; the dashboard's script and style


def _source_files() -> set[str]:
    """Every module and data file of the tree, as the wheel names it."""
    found: set[str] = set()
    for folder, installed in FOLDERS.items():
        root = REPO / folder
        for path in root.rglob("*"):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if folder == "authoring" and path.parent != root:
                continue  # the other folders are packages of their own
            if path.suffix == ".py" or path.suffix in DATA_SUFFIXES or path.name == "py.typed":
                found.add(f"{installed}/{path.relative_to(root).as_posix()}")
    return found


def _declared_packages() -> set[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    return set(config["tool"]["setuptools"]["packages"])


def test_every_package_and_data_folder_is_declared() -> None:
    wanted = {f.rsplit("/", 1)[0].replace("/", ".") for f in _source_files()}
    assert _declared_packages() == wanted


@pytest.mark.timeout(120)
def test_a_wheel_builds_without_a_warning_and_holds_every_file(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in FOLDERS:
        shutil.copytree(REPO / folder, tree / folder, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, tree / name)
    # This machine's own habit of not writing bytecode would be a warning of its own.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONWARNINGS")}
    build = subprocess.run(
        [sys.executable, "-W", "always", "-c",
         "import setuptools.build_meta as b; print(b.build_wheel('dist'))"],
        cwd=tree, env=env, capture_output=True, text=True, timeout=100)
    output = build.stdout + build.stderr
    assert build.returncode == 0, output[-3000:]
    warnings = [line for line in output.splitlines() if "warn" in line.lower()]
    assert warnings == [], "\n".join(warnings[:20])
    wheel = tree / "dist" / build.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as archive:
        shipped = {n for n in archive.namelist() if not n.split("/")[0].endswith(".dist-info")}
    assert shipped == _source_files()
