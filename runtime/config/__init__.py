"""Configuration: YAML that remembers where every value came from
(:mod:`~runtime.config.yaml_config`, loaded on first use with ``yaml``), and objects
imported from ``package.module:attribute`` paths."""

from typing import TYPE_CHECKING

from runtime.config.imports import import_object
from runtime.lazy import lazy_attributes

if TYPE_CHECKING:
    from runtime.config.yaml_config import (
        YamlDocument,
        YamlPath,
        format_path,
        load_yaml,
        parse_yaml,
    )

__all__ = ["YamlDocument", "YamlPath", "format_path", "import_object", "load_yaml", "parse_yaml"]

_LAZY = {
    "YamlDocument": "runtime.config.yaml_config",
    "YamlPath": "runtime.config.yaml_config",
    "format_path": "runtime.config.yaml_config",
    "load_yaml": "runtime.config.yaml_config",
    "parse_yaml": "runtime.config.yaml_config",
}

__getattr__ = lazy_attributes("runtime.config", _LAZY, globals())
