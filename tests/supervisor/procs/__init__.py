"""Tests of `supervisor/procs/`: worker handles and lock holders."""
