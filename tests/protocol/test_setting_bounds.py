"""Every number setting has bounds, and a value past them is a usage error on both paths.

A value that parses as the setting's type but is far out of range (a lease
of 2**70 ms, a poll interval of 1e400, which is inf, NaN, a negative time,
an integer of more than 4300 digits) once passed or crashed the command
line with exit 70 and later the host. Each must be refused with exit 2 and
the same one line by the fast path and the typer app.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pi_workflows.protocol.settingspec import FIELDS, Bounds, Setting

from tests.helpers.cli import run_cli

NUMERIC = [f for f in FIELDS.values() if {int, float} & set(f.kinds) and bool not in f.kinds]


def _bad_values(field: Setting) -> list[str]:
    """Texts of the setting's type that lie outside its bounds."""
    bounds = field.bounds
    assert bounds.le is not None
    above = int(bounds.le) + 1 if int in field.kinds else bounds.le * 2
    below = (bounds.ge if bounds.ge is not None else bounds.gt or 0) - 1
    values = [str(above), str(int(below) if int in field.kinds else below),
              "1180591620717411303424", "9" * 5000]
    if float in field.kinds:
        values += ["1e400", "inf", "-inf", "nan", "-1e400"]
    return values


def test_every_number_setting_has_a_lower_and_an_upper_bound() -> None:
    assert len(NUMERIC) >= 10  # the lease, the host's times and counts, the agent's reminders
    for field in NUMERIC:
        assert field.bounds.le is not None, field.name
        assert field.bounds.ge is not None or field.bounds.gt is not None, field.name
        default = field.default if field.default is not None else field.bounds.ge
        assert default is not None and field.bounds.holds(default), field.name


def test_nan_and_infinity_hold_no_bounds() -> None:
    for value in (float("nan"), float("inf"), float("-inf")):
        assert not Bounds(ge=0, le=10).holds(value)
    assert not Bounds(gt=0, le=10).holds(float("nan"))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("field", NUMERIC, ids=[f.name for f in NUMERIC])
def test_a_value_out_of_bounds_is_exit_2_on_both_paths(field: Setting, tmp_path: Path) -> None:
    variable = f"PI_WORKFLOWS_{field.name.upper()}"
    for value in _bad_values(field):
        env = {**os.environ, variable: value}
        fast = run_cli("list", "--json", env=env, cwd=tmp_path)
        full = run_cli("list", "--json", env={**env, "PI_WORKFLOWS_NO_FAST_CLI": "1"},
                       cwd=tmp_path)
        assert (fast.returncode, fast.stdout, fast.stderr) == (
            full.returncode, full.stdout, full.stderr), (field.name, value[:30])
        assert fast.returncode == 2, (field.name, value[:30], fast.stderr)
        assert fast.stderr.startswith(f"pi-workflows: error: invalid setting {field.name}"
                                      f" (environment variable {variable}): expected ")
        assert len(fast.stderr.splitlines()) == 1
        # The value is never shown (a setting may hold a secret).
        assert len(value) < 4 or value[:30] not in fast.stderr


@pytest.mark.timeout(60)
def test_a_config_file_number_too_long_to_read_is_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f"lease_ms = {'9' * 5000}\n")
    env = {**os.environ, "PI_WORKFLOWS_CONFIG": str(config)}
    for extra in ({}, {"PI_WORKFLOWS_NO_FAST_CLI": "1"}):
        out = run_cli("list", "--json", env={**env, **extra}, cwd=tmp_path)
        assert out.returncode == 2, out.stderr
        assert out.stderr == (f"pi-workflows: error: the config file {config} holds a number"
                              " too long to read\n")
