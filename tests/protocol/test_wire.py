"""The host↔worker wire: what a runner builds, a worker parses back unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from pi_workflows.protocol.wire import (
    ForkRequest,
    decode_zygote_message,
    exit_message,
    forked_worker_args,
    marker_value,
    parse_marker,
    parse_worker_args,
    worker_argv,
    zygote_argv,
    zygote_marker,
)


@pytest.mark.timeout(10)
def test_worker_argv_round_trips_through_the_workers_parser(tmp_path: Path) -> None:
    argv = worker_argv(tmp_path, "host-x", 4242, run_id="r1", claim_state="running", force=True)
    assert argv[1:3] == ["-m", "pi_workflows.worker"]
    args = parse_worker_args(argv[3:])
    assert (args.project, args.runner, args.parent_pid, args.run, args.claim_state, args.force,
            args.zygote) == (str(tmp_path), "host-x", 4242, "r1", "running", True, None)
    zygote = parse_worker_args(zygote_argv(tmp_path, "host-x", 1, 7)[3:])
    assert zygote.zygote == 7 and zygote.run is None and zygote.parent_pid == 1
    with pytest.raises(ValueError):
        worker_argv(tmp_path, "host-x", 1)  # a run worker needs its run


@pytest.mark.timeout(10)
@pytest.mark.parametrize(("state", "force"), [("starting", False), ("running", True)])
def test_a_forked_worker_gets_exactly_what_the_parser_would_give_a_cold_one(
        tmp_path: Path, state: str, force: bool) -> None:
    argv = worker_argv(tmp_path, "host-x", 4242, run_id="r1", claim_state=state, force=force)
    built = forked_worker_args(tmp_path, "host-x", 4242, run_id="r1", claim_state=state,
                               force=force)
    assert vars(built) == vars(parse_worker_args(argv[3:]))
    with pytest.raises(ValueError):
        forked_worker_args(tmp_path, "host-x", 1, run_id="r1", claim_state="parked")


@pytest.mark.timeout(10)
def test_fork_request_and_reports_round_trip() -> None:
    request = ForkRequest("r1", "starting", "tok", "k/h/r1", '{"a": 1}', 42, force=True)
    assert ForkRequest.decode(request.encode()) == request
    assert decode_zygote_message(exit_message(7, -9)) == {"exit": 7, "code": -9}


@pytest.mark.timeout(10)
def test_the_zygote_marker_has_room_for_a_long_run_id_in_place() -> None:
    padded = zygote_marker("proj-0123", "host-a")
    assert parse_marker(padded, "proj-0123") is not None
    assert len(marker_value("proj-0123", "host-a", "x" * 120)) <= len(padded)


@pytest.mark.timeout(10)
def test_marker_names_runner_and_run_only_for_its_own_project() -> None:
    value = marker_value("proj-0123", "host-a", "r1")
    assert parse_marker(value, "proj-0123") == ("host-a", "r1")
    assert parse_marker(value, "other-4567") is None
    assert parse_marker("proj-0123/", "proj-0123") is None  # no runner
    assert parse_marker(None, "proj-0123") is None
