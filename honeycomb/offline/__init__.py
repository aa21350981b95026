"""The offline model: rules, no AI, so a whole hive runs with no network and no key."""

from honeycomb.offline.model import OfflineModel

__all__ = ["OfflineModel"]
