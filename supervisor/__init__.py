"""The supervisor side: the CLI, the host, the session runner and the views.

Imports ``pi_workflows.protocol``; starts the worker only as a subprocess and
never imports its engine.
"""
