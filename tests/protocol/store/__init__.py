"""Tests of `protocol/store/`: claims, leases, the queue, the feed, retention."""
