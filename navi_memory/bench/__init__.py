"""Benchmarks run by ``navi-memory bench ...`` (numpy + standard library only)."""
