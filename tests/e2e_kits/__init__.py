"""Tests of the e2e drills' own kits (an isolated Pi's files, the scripted model)."""
