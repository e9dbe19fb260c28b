"""Tests of `supervisor/maint/`: gc."""
