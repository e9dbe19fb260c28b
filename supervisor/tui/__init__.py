"""tui (issue 25)."""
