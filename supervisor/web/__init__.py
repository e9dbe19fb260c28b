"""web (issue 25)."""
