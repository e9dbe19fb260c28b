"""Tests of `supervisor/views/`: live view, watch, run references, times."""
