"""Tests of `protocol/`: states, the wire, settings, bundles, the fence, retries."""
