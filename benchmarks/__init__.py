"""Benchmarks of parallel fan-out: Honeycomb next to a hand-written asyncio floor."""
