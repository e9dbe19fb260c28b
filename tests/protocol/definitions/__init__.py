"""Tests of `protocol/definitions/`: the workflow model, validation, routing, discovery."""
