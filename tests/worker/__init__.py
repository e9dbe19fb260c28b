"""Tests of `worker/`: the engine, node executors, effects, resume, the spare."""
