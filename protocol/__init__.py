"""Everything two pi-workflows processes must agree on.

Owns: states, the runner-worker wire, settings and paths, error codes and
exit codes, limits and redaction, the durable store, bundles and the fence,
workflow definitions and discovery, and spawning child processes. Must not
import ``pi_workflows.worker`` or ``pi_workflows.supervisor``.
"""
