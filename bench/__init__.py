"""Benchmarks for pi-workflows: they print figures and assert nothing.

Run one with ``python -m bench NAME`` (``python -m bench`` lists them).
"""
