"""Tests of `supervisor/drill/`: the checker, the plan, the scratch rules."""
