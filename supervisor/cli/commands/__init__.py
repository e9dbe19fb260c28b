"""The commands, one module per family, each named after the commands it holds.

Each module's ``register(app)`` defines its commands on the typer app it is
given: ``cli.lazy`` calls it on an app of its own, and imports the module
only when one of its commands is looked up (``protocol.commands`` names the
module of each command). Imports the other supervisor wings, ``cli.options``
and ``cli.exits``; never another command module, never the worker.
"""
