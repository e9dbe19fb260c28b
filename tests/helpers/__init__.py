"""Helpers shared by the test suites: plain modules, no fixtures (those stay in conftest.py).

``clocks`` (fake and offset clocks), ``waiting`` (poll with a deadline),
``processes`` (start, hear from, wait for and reap child processes),
``children`` (the spawn-safe child bodies), ``cli`` (the CLI called in
process), ``engine`` (the engine harness), ``store`` (store builders),
``definitions`` (workflow builders), ``fake_os`` (a fake OS layer for the
host). Every module says what it owns and what it must not import; none
imports pytest fixtures, a conftest, a test module or ``e2e/`` (the e2e
kits import them, so the dependency runs one way).
"""
