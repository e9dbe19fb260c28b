"""The host: ``pi-workflows host`` and the processes it keeps going.

Owns the supervisor loop, serving it (signals, the wakeup socket, the wait),
the foreground entry, the host lock, the background start and stop, and the
crash budget. Imports ``procs``, ``views`` and ``protocol``; never
``session``, ``maint`` or ``cli``.
"""
