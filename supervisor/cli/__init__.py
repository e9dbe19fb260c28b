"""The command line: the ``pi-workflows`` entry point, its fast path, the typer app.

Owns parsing and wording: options, exit codes, the one-line error contract,
and one module per command family in ``cli.commands``. The top wing: it may
import every other wing of the supervisor and ``protocol``; nothing imports it.
"""
