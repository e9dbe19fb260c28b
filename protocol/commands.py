"""The commands of the ``pi-workflows`` CLI, in one table.

Owns ``COMMANDS``: one ``CommandEntry`` per command, with the name of the
module under ``pi_workflows.supervisor.cli.commands`` that defines it (a
name only: ``protocol`` never imports the supervisor), the one-line summary
``pi-workflows --help`` shows, and, for the commands the fast entry point
(``supervisor.cli.main``) parses by hand, a ``FastSpec`` of what it takes.
The typer app lists, shows and lazily imports the commands from it, and
``COMMAND_WORDS`` (the names a workflow may not take: ``pi-workflows
status`` must never be ambiguous) are its names. A new command is one entry
here and one module there; ``tests/supervisor/cli/test_command_table.py`` holds
the two together. Pure data, read on every call of the fast path: imports
only ``protocol.record``.
"""

from __future__ import annotations

from collections.abc import Mapping

from .record import record

MANY = 1 << 20  # no bound on positional arguments (task and answer words)


@record(frozen=True)
class FastSpec:
    """What the fast path accepts of one command; anything else is the typer app's.

    Each option may be given once, and an option's value may not start with
    ``-``. A call without every ``required`` flag or option is left to typer,
    which words a missing argument (or shows a human view, such as ``run``
    watched live).
    """

    least: int  # positional arguments, at least
    most: int  # and at most
    flags: frozenset[str] = frozenset()  # options without a value
    # Options followed by their value; every command takes --project.
    valued: frozenset[str] = frozenset({"--project"})
    required: frozenset[str] = frozenset({"--json"})
    passthrough: bool = False  # ``--`` ends the options; the words after it go on (to pi)


@record(frozen=True)
class CommandEntry:
    """One command: its name, its module under ``supervisor.cli.commands``, its summary."""

    name: str
    module: str
    summary: str  # one line of ``pi-workflows --help``: at most 57 characters
    fast: FastSpec | None = None


_INPUT = frozenset({"--project", "--session", "--input-json", "--input-file"})

# In the order ``pi-workflows --help`` lists them (docs/cli.md's order).
COMMANDS: tuple[CommandEntry, ...] = (
    CommandEntry("host", "host", "Run the supervisor: a worker subprocess per claimed run.",
                 FastSpec(0, 0, valued=frozenset({"--project", "--concurrency"}),
                          required=frozenset(), passthrough=True)),
    CommandEntry("run", "run", "Start a run, here and shown live, or queued (--detach).",
                 FastSpec(1, MANY, frozenset({"--json", "--detach"}), _INPUT,
                          required=frozenset({"--json", "--detach"}))),
    CommandEntry("start", "start_activate",
                 "Reserve a run for a session, to start with `activate`.",
                 FastSpec(1, MANY, frozenset({"--json", "--by-agent"}), _INPUT)),
    CommandEntry("activate", "start_activate",
                 "Start a session's reserved run here and show it live.",
                 # The Pi extension's session runner only; --json is typer's.
                 FastSpec(0, 0, frozenset({"--park-on-eof"}),
                          frozenset({"--project", "--session"}),
                          required=frozenset({"--session", "--park-on-eof"}))),
    CommandEntry("sync", "sync", "Catch a session up on changed runs and its messages.",
                 FastSpec(0, 0, frozenset({"--json", "--hold-follow-ups"}),
                          frozenset({"--project", "--session"}))),
    CommandEntry("resolve-follow-up", "resolve_follow_up",
                 "Mark a follow-up leased by `sync` delivered.",
                 FastSpec(1, 1, frozenset({"--json"}), frozenset({"--project", "--token"}),
                          required=frozenset({"--json", "--token"}))),
    CommandEntry("pi-extension", "pi_extension",
                 "Print the path of the pi-workflows Pi extension."),
    CommandEntry("status", "status_list",
                 "Show a run's state, or every unfinished and waiting run.",
                 FastSpec(0, 1, frozenset({"--json", "--nodes"}),
                          frozenset({"--project", "--session"}))),
    CommandEntry("list", "status_list", "List the project's runs, newest first, chains grouped.",
                 FastSpec(0, 0, frozenset({"--json"}), frozenset(
                     {"--project", "--state", "--workflow", "--since", "--until", "--limit",
                      "--offset"}))),
    CommandEntry("answer", "answer", "Answer a run waiting at a checkpoint.",
                 FastSpec(1, MANY, frozenset({"--json", "--force"}), _INPUT)),
    CommandEntry("cancel", "cancel", "Cancel a run and wait until it has stopped.",
                 FastSpec(1, 1, frozenset({"--json", "--no-wait", "--by-agent"}),
                          frozenset({"--project", "--session"}))),
    CommandEntry("pause", "pause", "Hold a run at its next node boundary until `resume`."),
    CommandEntry("watch", "watch", "Follow a run live until it settles (view only)."),
    CommandEntry("logs", "logs", "Show what each step of a run printed and produced."),
    CommandEntry("resume", "resume",
                 "Resume a paused or parked run (or accept a changed file)."),
    CommandEntry("fork", "fork", "Queue a new run from a node of a run that has ended."),
    CommandEntry("chat", "chat_export",
                 "Continue a run's agent conversation in an interactive Pi."),
    CommandEntry("export", "chat_export", "Write a run's agent conversation as an HTML page."),
    CommandEntry("view", "view", "Browse runs in the terminal: list, graph, steps, replay."),
    CommandEntry("ui", "ui", "Serve a local web dashboard of the project's runs."),
    CommandEntry("graph", "graph", "Draw a workflow's or a run's graph as text, SVG or DOT."),
    CommandEntry("workflows", "workflows_validate",
                 "List the workflows a project can run, and broken files."),
    CommandEntry("validate", "workflows_validate",
                 "Check one workflow file (or a workflow by its name)."),
    CommandEntry("controller", "controller",
                 "Apply, show, reconcile or delete controller resources."),
    CommandEntry("controllers", "controller",
                 "List the controller files a project has, and broken ones."),
    CommandEntry("gc", "gc", "Remove settled runs older than a duration, whole chains."),
    CommandEntry("delete", "delete", "Delete one run that has ended: its rows and bundle."),
    CommandEntry("doctor", "doctor", "Check Python, Pi, the store, permissions, host and disk."),
    CommandEntry("drill", "drill", "Run a seeded kill -9 drill in a scratch project."),
    CommandEntry("model", "model", "Serve a scripted model to try agent steps offline."),
    CommandEntry("paths", "paths", "Show where a project's store, bundles, lock and logs are."),
)

BY_NAME: Mapping[str, CommandEntry] = {entry.name: entry for entry in COMMANDS}

# From COMMANDS itself, not BY_NAME: a name given twice stays visible (a test refuses it).
COMMAND_WORDS: tuple[str, ...] = tuple(entry.name for entry in COMMANDS)
