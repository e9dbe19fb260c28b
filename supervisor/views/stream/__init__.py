"""views/stream (issue 25)."""
