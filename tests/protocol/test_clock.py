"""``now_ms`` and the drill's clock offset: stepped only when the drill names a file."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pi_workflows.protocol import clock


def _at_once(path: Path, text: str) -> None:
    path.write_text(text)
    clock._offset = (-1.0, 0)  # as if the cache had run out: the test does not wait for it


def test_without_the_variable_now_ms_is_the_wall_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clock, "_OFFSET_FILE", None)
    assert abs(clock.now_ms() - time.time() * 1000) < 1000


def test_the_offset_file_steps_now_ms_either_way_and_a_bad_one_steps_nothing(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    offset = tmp_path / "offset"
    monkeypatch.setattr(clock, "_OFFSET_FILE", str(offset))
    for text, step_s in (("+3600\n", 3600), ("-3600\n", -3600), ("+0\n", 0), ("junk", 0),
                         ("", 0)):
        _at_once(offset, text)
        assert abs(clock.now_ms() - time.time() * 1000 - step_s * 1000) < 1000, text
    offset.unlink()
    _at_once(offset.with_name("unused"), "")
    assert abs(clock.now_ms() - time.time() * 1000) < 1000  # no file: no step
