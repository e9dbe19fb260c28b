"""The command words of the ``pi-workflows`` CLI, in one list.

Owns ``COMMAND_WORDS``: exactly the commands the CLI has. A workflow may not
be named after one (``pi-workflows status`` must never be ambiguous); a
test holds this list to the commands the CLI registers, so a new command
adds its word here. Imports nothing from the package.
"""

from __future__ import annotations

COMMAND_WORDS: tuple[str, ...] = (
    "host", "run", "status", "list", "answer", "cancel", "resume", "watch", "paths",
    "workflows", "validate", "start", "activate", "sync", "chat", "export",
    # Being added alongside (issue 11); the test allows them until they are registered.
    "logs", "fork", "gc", "doctor", "drill",
    "pi-extension", "resolve-follow-up",
)
