"""Limits on what enters the store, and redaction of stored error messages."""

from __future__ import annotations

import pytest
from pi_workflows.protocol.errors import LimitError
from pi_workflows.protocol.limits import (
    MAX_ERROR_BYTES,
    MAX_KEY_CHARS,
    MAX_PAYLOAD_BYTES,
    MAX_PRIVATE_INPUT_BYTES,
    safe_error_message,
    validate_key,
    validate_run_id,
)
from pi_workflows.protocol.store import Store

from tests.helpers.store import SOURCE, events, put_in_state, raw_row

# ---- run ids and keys -----------------------------------------------------------


@pytest.mark.parametrize("run_id", ["a", "Run-1", "2024.01.01_x", "a" * 200, "x..y"])
def test_valid_run_ids(store: Store, run_id: str) -> None:
    assert validate_run_id(run_id) == run_id
    store.enqueue_detached(run_id, SOURCE, {})
    assert store.get(run_id) is not None


@pytest.mark.parametrize("run_id", ["../x", "", "a" * 201, ".hidden", "-x", "_x", "a/b",
                                    "a b", "caf\u00e9", "x\n", None, 7])
def test_invalid_run_ids(store: Store, run_id: object) -> None:
    with pytest.raises(LimitError) as info:
        validate_run_id(run_id)
    assert info.value.code == "invalid_run_id"
    with pytest.raises(LimitError):
        store.enqueue_detached(run_id, SOURCE, {})  # type: ignore[arg-type]
    assert store.list_runs() == [] and store.events_since(0) == []


def test_key_limits(store: Store) -> None:
    assert validate_key("k" * MAX_KEY_CHARS) == "k" * MAX_KEY_CHARS
    assert MAX_KEY_CHARS == 512
    for bad in ("k" * 513, "", "a\nb", "tab\there", "nul\x00", None):
        with pytest.raises(LimitError) as info:
            validate_key(bad, "session id")
        assert info.value.code == "invalid_key"
    with pytest.raises(LimitError):
        store.reserve("r1", SOURCE, {}, "s" * 513)
    with pytest.raises(LimitError):
        store.claim_next("runner\x1b[31m")
    assert store.get("r1") is None


# ---- sizes ------------------------------------------------------------------------


def test_private_input_is_bounded_to_one_mebibyte(store: Store) -> None:
    assert MAX_PRIVATE_INPUT_BYTES == 1024 * 1024
    fits = "x" * (MAX_PRIVATE_INPUT_BYTES - 2)  # a JSON string adds two quotes
    store.enqueue_detached("fits", SOURCE, fits)
    with pytest.raises(LimitError) as info:
        store.enqueue_detached("too-big", SOURCE, fits + "x")
    assert info.value.code == "input_too_large"
    assert store.get("too-big") is None
    with pytest.raises(LimitError):  # multibyte text counts in bytes
        store.enqueue_detached("too-big", SOURCE, "\u00e9" * (MAX_PRIVATE_INPUT_BYTES // 2))


def test_unserialisable_input_is_refused_without_echoing_it(store: Store) -> None:
    with pytest.raises(LimitError) as info:
        store.enqueue_detached("r1", SOURCE, {"secret-marker-1": {1, 2}})
    assert info.value.code == "input_invalid"
    assert "secret-marker-1" not in str(info.value)


def test_payloads_are_bounded_to_64_kib(store: Store) -> None:
    assert MAX_PAYLOAD_BYTES == 64 * 1024
    fits = {"a": "x" * (MAX_PAYLOAD_BYTES - len('{"a":""}'))}
    store.append_run_event("r1", "note", fits)
    with pytest.raises(LimitError) as info:
        store.append_run_event("r1", "note", {"a": fits["a"] + "x"})
    assert info.value.code == "payload_too_large"
    assert len(store.events_since(0)) == 1
    with pytest.raises(LimitError):
        store.create_turn_intent("s1", "r1", "launch_failed", "x", {"a": "x" * 70_000})
    assert store.claim_turn_intents("s1")[1] == []


# ---- redaction ------------------------------------------------------------------------

SECRETS = {
    "Authorization: Bearer abc.DEF-123": "abc.DEF-123",
    "bearer sk-live-0042": "sk-live-0042",
    "GET /x?token=tok123&page=2": "tok123",
    "refresh_token: rt-9 failed": "rt-9",
    "api_key: AKIA0000SECRET": "AKIA0000SECRET",
    "x-api-key=k-77": "k-77",
    "secret=shh-1; retry": "shh-1",
    "client_secret = 'quoted value here'": "quoted value here",
    "password=hunter2": "hunter2",
    'PASSWORD="two words"': "two words",
    '{"password": "json-pw", "user": "bob"}': "json-pw",
    "{'api_key': 'repr-key'}": "repr-key",
}


@pytest.mark.parametrize("text", sorted(SECRETS))
def test_secrets_are_redacted(text: str) -> None:
    safe = safe_error_message(text)
    assert SECRETS[text] not in safe
    assert "[redacted]" in safe


def test_redaction_keeps_the_useful_part() -> None:
    text = "provider said 401 for model gpt-x: Bearer abc; check the key in settings"
    safe = safe_error_message(text)
    assert safe == "provider said 401 for model gpt-x: Bearer [redacted]; check the key in settings"
    assert safe_error_message("tokens=5 exceeded") == "tokens=5 exceeded"


@pytest.mark.parametrize("text", ["", "   \n\t ", None])
def test_empty_message_gets_the_fallback(text: object) -> None:
    assert safe_error_message(text) == "unknown error"
    assert safe_error_message(text, fallback="activation failed") == "activation failed"


@pytest.mark.parametrize("unit", ["x", "\u00e9", "\u20ac", "\U0001f600"])
def test_long_messages_are_truncated_to_valid_utf8(unit: str) -> None:
    safe = safe_error_message(unit * 5000)
    data = safe.encode()
    assert 1 <= len(data) <= MAX_ERROR_BYTES == 2048
    assert data.decode() == safe  # no broken code point
    assert safe.endswith("[truncated]")
    assert safe_error_message(unit * 10) == unit * 10


def test_messages_become_one_line() -> None:
    assert safe_error_message("line one\n  line two\r\n\tthree") == "line one line two three"


def test_fail_stores_the_redacted_bounded_message(store: Store) -> None:
    token = put_in_state(store, "r1", "running")
    text = "upstream 401: Authorization: Bearer sk-SECRET-1 password=hunter2\n" + "z" * 5000
    row = store.fail("r1", token, "node_failed", text)
    stored = raw_row(store, "r1")
    assert stored is not None
    assert events(store, "r1")[-1].payload == {"from": "running", "errorCode": "node_failed"}
    for message in (row.error_message, stored["error_message"]):
        assert isinstance(message, str)
        assert "sk-SECRET-1" not in message and "hunter2" not in message
        assert 1 <= len(message.encode()) <= MAX_ERROR_BYTES
        assert message.startswith("upstream 401: Authorization: Bearer [redacted]")


def test_fail_with_an_empty_message_stores_the_fallback(store: Store) -> None:
    token = put_in_state(store, "r1", "starting")
    assert store.fail("r1", token, "activation_failed", "").error_message == "unknown error"
    other = put_in_state(store, "r2", "starting")
    before = raw_row(store, "r2")
    with pytest.raises(LimitError):
        store.fail("r2", other, "code\nwith newline", "m")
    assert raw_row(store, "r2") == before
