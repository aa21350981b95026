"""The hive file: models, roles, tools, planner, aggregator, policies and memory in one
YAML file, checked with every mistake reported at once."""

from honeycomb.hive.hive import DEFAULT_MEMORY, Hive, MemorySpec, ModelSpec, load_hive

__all__ = ["DEFAULT_MEMORY", "Hive", "MemorySpec", "ModelSpec", "load_hive"]
