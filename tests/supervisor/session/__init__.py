"""Tests of `supervisor/session/`: sync snapshots and forks."""
