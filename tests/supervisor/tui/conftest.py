"""The viewer tests' fixture: ``recorded``, a project of real recorded runs (``recorded.py``)."""

from __future__ import annotations

import pytest

from tests.helpers.engine import Harness

from .recorded import Recorded, record


@pytest.fixture
def recorded(cli: Harness) -> Recorded:
    return record(cli)
