"""The host↔worker wire: what a runner builds, a worker parses back unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from pi_workflows.protocol.wire import (
    Assignment,
    marker_value,
    parse_marker,
    parse_worker_args,
    worker_argv,
)


@pytest.mark.timeout(10)
def test_worker_argv_round_trips_through_the_workers_parser(tmp_path: Path) -> None:
    argv = worker_argv(tmp_path, "host-x", 4242, run_id="r1", claim_state="running", force=True)
    assert argv[1:3] == ["-m", "pi_workflows.worker"]
    args = parse_worker_args(argv[3:])
    assert (args.project, args.runner, args.parent_pid, args.run, args.claim_state, args.force,
            args.standby) == (str(tmp_path), "host-x", 4242, "r1", "running", True, False)
    standby = parse_worker_args(worker_argv(tmp_path, "host-x", 1, standby=True)[3:])
    assert standby.standby and standby.run is None
    with pytest.raises(ValueError):
        worker_argv(tmp_path, "host-x", 1)  # a run worker needs its run


@pytest.mark.timeout(10)
def test_assignment_line_round_trips_and_eof_means_not_needed() -> None:
    line = Assignment("r1", "starting", "tok").encode()
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert Assignment.decode(line.decode()) == Assignment("r1", "starting", "tok")
    assert Assignment.decode("") is None


@pytest.mark.timeout(10)
def test_marker_names_runner_and_run_only_for_its_own_project() -> None:
    value = marker_value("proj-0123", "host-a", "r1")
    assert parse_marker(value, "proj-0123") == ("host-a", "r1")
    assert parse_marker(value, "other-4567") is None
    assert parse_marker("proj-0123/", "proj-0123") is None  # no runner
    assert parse_marker(None, "proj-0123") is None
