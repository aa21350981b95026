"""Calls made by another user than the one running the tests, whom permissions stop
(root, whom none stop, runs them as ``nobody``)."""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = ["as_another_user"]


def as_another_user(call: Callable[[], str]) -> str:
    """What ``call()`` returns, or the text of what it raises, in a child process of
    this one, run by user ``nobody`` when this one is root: forked, since that user may
    not read this Python."""
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover (the child's)
        said = ""
        try:
            if os.geteuid() == 0:
                os.setgroups([])
                os.setresgid(65534, 65534, 65534)
                os.setresuid(65534, 65534, 65534)
            said = call()
        except BaseException as exc:
            said = f"{type(exc).__name__}: {exc}"
        finally:
            os.write(writing, said.encode())
            os._exit(0)
    os.close(writing)
    with os.fdopen(reading, "rb") as answer:
        said = answer.read().decode()
    os.waitpid(child, 0)
    return said
