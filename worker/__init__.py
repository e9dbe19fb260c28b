"""The worker: the subprocess that executes exactly one claimed run.

Owns the engine, node executors and lease renewal. Imports
``pi_workflows.protocol`` only; never ``pi_workflows.supervisor``.
"""
