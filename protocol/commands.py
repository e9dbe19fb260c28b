"""The command words of the ``pi-workflows`` CLI, in one list.

Owns ``COMMAND_WORDS``: every word the CLI uses or will use as a command. A
workflow may not be named after one (``pi-workflows status`` must never be
ambiguous), so the list also holds the words reserved for coming commands;
a test checks that every command the CLI registers is here. Imports
nothing from the package.
"""

from __future__ import annotations

COMMAND_WORDS: tuple[str, ...] = (
    # Commands the CLI has today.
    "host", "run", "status", "list", "answer", "cancel", "resume", "watch", "paths",
    "workflows", "validate",
    # Reserved for coming commands: reserving a word later would break
    # workflows that already carry that name.
    "start", "activate", "sync", "chat", "export", "fork", "logs", "gc", "doctor",
    "pi-extension", "drill", "pause", "help",
)
