"""Tests of `authoring/`: the installed package and its `python -m pi_workflows`."""
