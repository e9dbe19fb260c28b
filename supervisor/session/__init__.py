"""A session's side of a run: launching, activating, attaching, answering, cancelling, sync.

Owns the terminal session runner, activation of a deferred launch, the run
actions the CLI and the fast path share, run input, preflight (``launch``),
``fork``, cancel and the nudge, and the catch-up snapshot. Imports ``views``,
``procs`` and ``protocol``; never ``host``, ``maint`` or ``cli``.
"""
