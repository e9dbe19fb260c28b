"""Tests of `bench/`: the benches still run and their statistics are right."""
