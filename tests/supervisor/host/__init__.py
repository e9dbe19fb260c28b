"""Tests of `supervisor/host/`: the host loop, its lock, wakeups, the zygote keeper."""
