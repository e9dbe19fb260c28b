"""The conversation protocol's wire format: versions, torn lines, bounds."""

from __future__ import annotations

import json

import pytest
from pi_workflows.protocol import conversation as wire

pytestmark = pytest.mark.timeout(10)


def test_a_message_round_trips_with_its_version() -> None:
    line = wire.encode(wire.STEP, runId="r", step="s", attempt="s-1-a", message="do it")
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    message = wire.decode(line[:-1])
    assert message == {"v": wire.VERSION, "type": "step", "runId": "r", "step": "s",
                       "attempt": "s-1-a", "message": "do it"}


@pytest.mark.parametrize("line, why", [
    (b'{"v": 2, "type": "call"}', "protocol version 2"),
    (b'{"type": "call"}', "protocol version None"),
    (b'{"v": 1, "type": "submit_everything"}', "unknown message type"),
    (b'["v", 1]', "not a JSON object"),
    (b'{"v": 1, "type": "ca', "not JSON"),
])
def test_decode_refuses_what_is_not_a_message_of_this_version(line: bytes, why: str) -> None:
    with pytest.raises(wire.ProtocolError, match=why):
        wire.decode(line)


def test_encode_refuses_an_unknown_type_and_an_oversized_message() -> None:
    with pytest.raises(wire.ProtocolError):
        wire.encode("nonsense")
    with pytest.raises(wire.ProtocolError, match="over"):
        wire.encode(wire.STEP, message="x" * wire.MAX_LINE_BYTES)


def test_a_torn_line_waits_for_its_end_and_a_garbled_one_is_reported_not_acted_on() -> None:
    reader = wire.LineReader()
    whole = wire.encode(wire.CALL, callId="c1", action="submit", output={"a": 1})
    assert reader.feed(whole[:10]) == [] and reader.torn
    assert reader.feed(whole[10:]) == [json.loads(whole)]
    assert not reader.torn
    out = reader.feed(b'{"v":1,"type":"call","out\n' + wire.encode(wire.REDELIVER))
    assert isinstance(out[0], wire.ProtocolError)
    assert out[1]["type"] == wire.REDELIVER


def test_an_endless_line_is_dropped_with_an_error() -> None:
    reader = wire.LineReader()
    out = reader.feed(b"x" * (wire.MAX_LINE_BYTES + 1))
    assert len(out) == 1 and isinstance(out[0], wire.ProtocolError)
    assert not reader.torn
