"""Paths a hive file gives (its ``store:``, ``memory: path:``, ``roles_dir``, a llama
model's ``path``, an MCP server's ``cwd``, a ``runtime_env``'s files, a ``hive:`` tool):
``~`` is the user's home, as a shell reads it, and a relative path is relative to the
hive's folder. One rule for all, said here once."""

from __future__ import annotations

import os
from pathlib import Path

from runtime.errors import did_you_mean

__all__ = ["beside", "folder_of", "home_known", "not_a_folder"]


def folder_of(file: Path) -> Path:
    """The folder of the hive file ``file``, where the paths it gives are read: that of
    the file a link points to (where its tools, roles and the hives it calls are, as
    its import paths resolve there), named as ``file`` is when it is no link."""
    if file.is_symlink():
        return file.resolve().parent
    return file.parent


def beside(folder: Path, given: str) -> Path:
    """The path ``given`` names, read in a hive of ``folder``: ``~`` and ``~user``
    expanded to that home folder, then relative to ``folder`` (an absolute path, or one
    from a home, as it is). A ``~user`` of no user known here stays as written
    (:func:`home_known` refuses it where the hive is checked)."""
    return folder / os.path.expanduser(given)


def home_known(given: str | None) -> str | None:
    """``given`` as it is, when its ``~`` (if any) names a home folder known here: a
    pydantic validator of the hive's path fields.

    Raises:
        ValueError: for ``~user/...`` of no user of this machine, which would else
            make a folder named ``~user`` in the hive's.
    """
    if given is not None and given.startswith("~") and os.path.expanduser(given) == given:
        home = given.split("/", 1)[0]
        raise ValueError(
            f"{given!r} starts with {home}, the home folder of no user here: write "
            "the folder in full, or ~/ for your own"
        )
    return given


def not_a_folder(folder: Path) -> str | None:
    """What is wrong with ``folder`` (a hive's ``roles_dir``) when it is no folder: a
    file (of roles, which go in a folder, or under ``roles:``), or nothing, with the
    folder beside it of a close name; None when it is a folder."""
    if folder.is_dir():
        return None
    if folder.exists():
        return (
            f"{folder} is a file, not a folder: roles_dir names a folder of role files "
            "(put the file in one, or its roles under roles:)"
        )
    parent = folder.parent
    beside_it = [p.name for p in parent.iterdir() if p.is_dir()] if parent.is_dir() else []
    return f"no such folder: {folder}{did_you_mean(folder.name, beside_it)}"
