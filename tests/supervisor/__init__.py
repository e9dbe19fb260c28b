"""Tests of `supervisor/`, one package per wing."""
