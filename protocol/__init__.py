"""Everything two pi-workflows processes must agree on.

Owns: settings and paths, error codes and exit codes, limits and redaction,
the durable store, the bundle fence. Must not import ``pi_workflows.worker``
or ``pi_workflows.supervisor``.
"""
