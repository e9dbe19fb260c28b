"""Reading runs for people and scripts: status, lists, the live view, logs.

Owns the status and report shapes, listing, the view protocol, following a
run's bundle, ``watch``, the live terminal view, wording and time formats,
step logs, and resolving a RUN reference. Never writes a bundle. A bottom
wing: imports ``protocol`` only.
"""
