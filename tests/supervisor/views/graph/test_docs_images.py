"""The graphs in docs/workflows.md are this command's output: regenerated here, so a
change to the layout or an example that is not refreshed in the docs fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import run_cli

REPO = Path(__file__).resolve().parents[4]
IMAGES = ("approve", "compose", "pipeline", "review", "review-step", "triage")


def refresh(name: str) -> str:
    return (f"pi-workflows graph examples/{name}.workflow.py --format svg"
            f" --output docs/images/graph-{name}.svg")


@pytest.mark.parametrize("name", IMAGES)
def test_committed_image_is_current(name: str, tmp_path: Path) -> None:
    out = tmp_path / f"{name}.svg"
    made = run_cli("graph", str(REPO / "examples" / f"{name}.workflow.py"), "--format", "svg",
                   "--output", str(out), cwd=REPO)
    assert made.returncode == 0, made.stderr
    committed = REPO / "docs" / "images" / f"graph-{name}.svg"
    assert committed.exists() and committed.read_text() == out.read_text(), (
        f"docs/images/graph-{name}.svg is stale; refresh it with `{refresh(name)}`"
        " (from the repository's root)")


def test_each_image_is_shown_in_the_docs() -> None:
    doc = (REPO / "docs" / "workflows.md").read_text()
    for name in IMAGES:
        assert f"images/graph-{name}.svg" in doc, name
