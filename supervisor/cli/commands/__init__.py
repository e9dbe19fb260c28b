"""The commands, one module per family, each named after the commands it holds.

Each module defines its commands on a typer app of its own and is imported
only when one of its commands runs (``protocol.commands`` names the module of
each command). Imports the other supervisor wings, ``cli.options`` and
``cli.exits``; never another command module.
"""
