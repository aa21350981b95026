"""The hive file meant when the one given is none: a folder, a file of the hive's
folder that is no YAML, a name misspelt (as a command's argument, or as a ``hive:``
tool's file)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from runtime import ConfigError, YamlDocument
from workers import Role
from workers.nesting import hive_ref

__all__ = ["another_file", "hive_files_in", "hive_tool_meant", "yaml_files"]


def another_file(doc: YamlDocument, file: Path) -> ConfigError | None:
    """The error of a file given as a hive that is one of a hive's other files, which
    says what it is and what reads it: an eval's cases file (``cases:``), or a file of
    roles (a role's fields, or roles of them, and none of a hive's ``models:``,
    ``roles:`` or ``roles_dir:``); None when it is neither."""
    data = doc.data
    if "cases" in data and "roles" not in data:  # evals.yaml, beside hive.yaml
        return doc.error(
            ("cases",),
            "this is an eval's cases file, not a hive file: honeycomb eval "
            f"HIVE.yaml {file} runs its cases on a hive",
        )
    if any(key in data for key in ("models", "roles", "roles_dir")) or not _roles(data):
        return None
    return doc.error(
        (),
        "this reads as a file of roles, not a hive file: a hive has models: and roles: "
        "(or roles_dir:, the folder its files of roles are in, which honeycomb validate "
        "HIVE.yaml checks with it)",
    )


def _roles(data: Mapping[str, Any]) -> bool:
    """Whether ``data`` reads as a role (a ``description:`` among a role's fields alone)
    or as roles by name (each a mapping with its ``description:``)."""
    if "description" in data:
        return set(data) <= set(Role.model_fields)
    bodies = list(data.values())
    return bool(bodies) and all(isinstance(b, Mapping) and "description" in b for b in bodies)


def hive_files_in(path: Path, error: ConfigError) -> ConfigError:
    """``error``, which reading ``path`` raised, naming the hive files meant: those in
    it when it is a folder (``honeycomb run myhive`` after ``honeycomb init myhive``),
    the one beside it when it is a file that is not YAML (``myhive/tools.py``), the one
    of a close name beside it when there is no such file (``hive.yml``)."""
    if path.is_dir():
        found = yaml_files(path)
        if "hive.yaml" in found:
            found = ["hive.yaml"]
        if not found:
            return error
        named = " or ".join(str(path / name) for name in found[:3])
        return ConfigError(f"{error.message}: name the hive file in it ({named})", file=error.file)
    if path.is_file() and path.suffix.lower() in NOT_YAML:
        # tools.py, README.md: a file of the hive's folder, not its hive file
        beside = yaml_files(path.parent)
        meant = "hive.yaml" if "hive.yaml" in beside else (beside[0] if beside else None)
        named = f": name the hive file ({path.parent / meant})" if meant is not None else ""
        return ConfigError(
            f"not a hive file: a hive file is YAML (models:, roles: ...), and this "
            f"{path.suffix} file is not{named}",
            file=error.file,
        )
    if path.exists() or not path.parent.is_dir():
        return error
    import difflib  # loads with the first misspelt name, as did_you_mean's

    files = {Path(name).stem: name for name in yaml_files(path.parent)}  # .yml or .yaml
    close = difflib.get_close_matches(path.stem, list(files), n=1, cutoff=0.6)
    if not close:
        return error
    meant = str(path.parent / files[close[0]])
    return ConfigError(f"{error.message} (did you mean {meant!r}?)", file=error.file)


NOT_YAML = (".py", ".md", ".rst", ".toml", ".db", ".html", ".jsonl")
"""What a hive's folder holds beside it that is surely no hive file: its tools, its
README, its run store, the pages and spans ``trace`` writes."""


def yaml_files(folder: Path) -> list[str]:
    """The names of the YAML files of ``folder``, sorted."""
    found = (*folder.glob("*.yaml"), *folder.glob("*.yml"))
    return sorted(p.name for p in found if p.is_file())


def hive_tool_meant(ref: str, path: Path) -> str:
    """``" (did you mean 'hive:...'?)"`` for the tool ``ref``, whose hive file ``path``
    is not there: the hive file in it when it is a folder (``hive:checks``), else the
    YAML file beside it of a close name; ``""`` when there is none."""
    written = PurePosixPath(str(hive_ref(ref)))
    if path.is_dir():
        found = yaml_files(path)
        name = "hive.yaml" if "hive.yaml" in found else (found[0] if len(found) == 1 else None)
        return f" (did you mean 'hive:{written / name}'?)" if name is not None else ""
    import difflib  # loads with the first misspelt name, as did_you_mean's

    files = {Path(name).stem: name for name in yaml_files(path.parent)}  # by their stems
    close = difflib.get_close_matches(path.stem, list(files), n=1, cutoff=0.6)
    return f" (did you mean 'hive:{written.parent / files[close[0]]}'?)" if close else ""
