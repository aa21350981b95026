"""What a process made by ``fork`` keeps of its parent's run stores.

A child made by ``fork`` (a server's workers forked once the app was loaded, or
``multiprocessing``'s default on Linux) inherits each store as its parent left it: a
writer whose thread is not in the child (only the forking thread is), so that a write
queued to it waits for ever; the connections of the parent's writer and of its pool of
PostgreSQL readers, whose sockets the parent goes on using; and the leases the parent
renews. So, in the child, each store drops what is its parent's and starts again as on
its first use: a thread, connections and leases of its own. What it drops is kept here,
untouched: closing it, or letting a finalizer close it, would end the parent's
connections.
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol

__all__ = ["Inherited", "inherited", "left"]


class Inherited(Protocol):
    """What holds threads or connections of the process that made it."""

    def forked(self) -> None:
        """In a child made by fork: drop (to :func:`left`) what is the parent's."""


_OWNERS: weakref.WeakSet[Inherited] = weakref.WeakSet()
_LEFT: list[object] = []
"""What children dropped of their parents': never closed, never finalized."""


def inherited(owner: Inherited) -> None:
    """Have ``owner.forked()`` called in each child this process forks from now on."""
    _OWNERS.add(owner)


def left(*parents: object) -> None:
    """Keep what a child dropped of its parent's, untouched, for as long as it runs."""
    _LEFT.extend(parent for parent in parents if parent is not None)


def _in_child() -> None:
    for owner in list(_OWNERS):
        owner.forked()


if hasattr(os, "register_at_fork"):  # POSIX: Windows has no fork
    os.register_at_fork(after_in_child=_in_child)
