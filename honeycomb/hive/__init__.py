"""The hive file: models, roles, tools, planner, aggregator, policies and memory in one
YAML file, checked with every mistake reported at once. :func:`load_hive` reads one;
its sections are the pydantic models below (``HiveSpec`` the whole file), which give
its JSON schema too."""

from honeycomb.hive.backend import BackendSpec, RaySpec
from honeycomb.hive.hive import DEFAULT_MEMORY, Hive, MemorySpec, ModelSpec
from honeycomb.hive.load import load_hive
from honeycomb.hive.specs import EmbeddingsSpec, HiveSpec, PlannerSpec, StoreSpec
from runtime.config.yaml_config import YamlDocument, YamlPlace

__all__ = [
    "DEFAULT_MEMORY",
    "BackendSpec",
    "EmbeddingsSpec",
    "Hive",
    "HiveSpec",
    "MemorySpec",
    "ModelSpec",
    "PlannerSpec",
    "RaySpec",
    "StoreSpec",
    "YamlDocument",
    "YamlPlace",
    "load_hive",
]
