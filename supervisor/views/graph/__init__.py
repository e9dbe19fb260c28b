"""views/graph (issue 25)."""
