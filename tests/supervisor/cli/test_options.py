"""Run input from words, JSON text or a file, and session ids: the CLI's shared parsing."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from pi_workflows.protocol.errors import LimitError, UsageError
from pi_workflows.protocol.limits import MAX_PRIVATE_INPUT_BYTES
from pi_workflows.supervisor.cli.options import json_input, parse_input, session_id

pytestmark = pytest.mark.timeout(30)


def test_words_json_and_file_are_alternatives(tmp_path: Path) -> None:
    assert parse_input(["fix", "it"], None) == {"task": "fix it"}
    assert parse_input(None, None) == {}
    assert parse_input(None, '{"a": 1}') == {"a": 1}
    path = tmp_path / "in.json"
    path.write_text('{"b": [1, 2]}')
    assert parse_input(None, None, str(path)) == {"b": [1, 2]}
    with pytest.raises(UsageError, match="not both"):
        parse_input(["x"], None, str(path))
    with pytest.raises(UsageError, match="either --input-json or --input-file"):
        json_input("{}", str(path))


def test_a_file_may_reach_the_input_limit_but_not_pass_it(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    body = '"' + "x" * (MAX_PRIVATE_INPUT_BYTES - 2) + '"'
    big.write_text(body)  # exactly the limit: more than one argument could carry
    assert len(parse_input(None, None, str(big))) == MAX_PRIVATE_INPUT_BYTES - 2
    big.write_text(body + " ")
    with pytest.raises(LimitError, match="larger than"):
        parse_input(None, None, str(big))


def test_bad_files_are_one_clear_error_without_their_content(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read --input-file"):
        parse_input(None, None, str(tmp_path / "missing.json"))
    secret = tmp_path / "secret.json"
    secret.write_text('{"password": "hunter2",')
    with pytest.raises(UsageError) as caught:
        parse_input(None, None, str(secret))
    assert "hunter2" not in caught.value.message and "position" in caught.value.message
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(UsageError, match="not UTF-8"):
        parse_input(None, None, str(binary))


def test_dash_reads_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = io.TextIOWrapper(io.BytesIO(json.dumps({"from": "stdin"}).encode()))
    monkeypatch.setattr("sys.stdin", fake)
    assert parse_input(None, None, "-") == {"from": "stdin"}


@pytest.mark.parametrize("bad", ["", "../x", "a b", "-lead", "x" * 201, "tab\there"])
def test_session_ids_follow_the_run_id_rule(bad: str) -> None:
    with pytest.raises(LimitError, match="invalid session id"):
        session_id(bad)
    assert session_id("pi-session.01_A") == "pi-session.01_A"
    assert session_id(None) is None
