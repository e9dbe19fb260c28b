"""Helpers shared by the test suites (see each module's docstring for what it owns)."""
