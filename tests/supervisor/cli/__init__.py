"""Tests of `supervisor/cli/`: the commands' output, help, options and exit codes."""
