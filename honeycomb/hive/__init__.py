"""The hive file: models, roles, tools, planner, aggregator and policies in one YAML
file, checked with every mistake reported at once."""

from honeycomb.hive.hive import Hive, ModelSpec, load_hive

__all__ = ["Hive", "ModelSpec", "load_hive"]
