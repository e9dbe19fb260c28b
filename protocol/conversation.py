"""The session conversation protocol: in-session agent steps between a worker and Pi.

Owns the wire format a session runner's worker and the Pi extension of the
session that runs it speak (docs/pi-extension.md, "The conversation
protocol"): JSON objects, one per line (UTF-8, at most ``MAX_LINE_BYTES``),
over a private UNIX socket the extension listens on and names to the
runner it spawns in ``CONVERSATION_ENV``. Every message carries ``"v"``
(``VERSION``) and ``"type"``; ``decode`` refuses a torn line, a non-object,
an unknown type and another version, so neither end acts on half a
message. The TypeScript end is ``supervisor/piext/conversation.ts``; the two
must change together, with a new version. Imports nothing of pi_workflows.
"""

from __future__ import annotations

import json
from typing import Any

VERSION = 1
CONVERSATION_ENV = "PI_WORKFLOWS_CONVERSATION"
MAX_LINE_BYTES = 8 * 1024 * 1024  # a submission beyond this is refused by the output limits anyway

# worker -> extension
HELLO = "hello"  # {runId, workflow, session}: first line of a connection
STEP = "step"  # {runId, step, attempt, message}: put the step in the conversation, start a turn
REMIND = "remind"  # {runId, step, attempt, message}: the turn ended without a submission
VERDICT = "verdict"  # {callId, ok, message}: the answer to one ``call``
STEP_DONE = "step_done"  # {runId, step, attempt, outcome}: calls for it are refused from now
# extension -> worker
WELCOME = "welcome"  # {session}: the handshake is done
REFUSED = "refused"  # {reason}: the handshake failed (another version, another session)
CALL = "call"  # {callId, action: submit|update, step, attempt, output | update}
SETTLED = "settled"  # {step, attempt, aborted}: an agent turn ended with the step pending
REDELIVER = "redeliver"  # {}: a held step is to be delivered again (``/workflow resume``)

TYPES = frozenset({HELLO, STEP, REMIND, VERDICT, STEP_DONE, WELCOME, REFUSED, CALL, SETTLED,
                   REDELIVER})


class ProtocolError(ValueError):
    """A line that is not a message of this version; the text is safe to log."""


def encode(kind: str, **fields: Any) -> bytes:
    """One message as its line, newline included."""
    if kind not in TYPES:
        raise ProtocolError(f"unknown message type {kind!r}")
    line = json.dumps({"v": VERSION, "type": kind, **fields}, separators=(",", ":"))
    data = line.encode() + b"\n"
    if len(data) > MAX_LINE_BYTES:
        raise ProtocolError(f"message {kind} is {len(data)} bytes, over {MAX_LINE_BYTES}")
    return data


def decode(line: bytes) -> dict[str, Any]:
    """One line (without its newline) as a message; ``ProtocolError`` if it is not one."""
    try:
        message = json.loads(line)
    except ValueError:
        raise ProtocolError("a line that is not JSON (torn or garbled)") from None
    if not isinstance(message, dict):
        raise ProtocolError("a line that is not a JSON object")
    version = message.get("v")
    if version != VERSION:
        raise ProtocolError(f"protocol version {version!r}, this end speaks {VERSION}")
    if message.get("type") not in TYPES:
        raise ProtocolError(f"unknown message type {str(message.get('type'))[:40]!r}")
    return message


class LineReader:
    """Bytes in, whole lines out: a torn tail waits for its newline, an endless one is refused."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[dict[str, Any] | ProtocolError]:
        """The messages (or the errors of lines that were not messages) ``data`` completes."""
        self._buffer += data
        out: list[dict[str, Any] | ProtocolError] = []
        while (end := self._buffer.find(b"\n")) >= 0:
            line, self._buffer = self._buffer[:end], self._buffer[end + 1:]
            if not line.strip():
                continue
            try:
                out.append(decode(line))
            except ProtocolError as exc:
                out.append(exc)
        if len(self._buffer) > MAX_LINE_BYTES:
            self._buffer = b""
            out.append(ProtocolError(f"a line over {MAX_LINE_BYTES} bytes"))
        return out

    @property
    def torn(self) -> bool:
        """Whether bytes of an unfinished line are held (at EOF they are dropped)."""
        return bool(self._buffer)
