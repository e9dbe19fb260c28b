"""Tests of the workflow authoring layer: model, validation, routing, discovery, CLI."""
