"""YAML that remembers where every value came from, so configuration errors can name
the file, line, column and field path, with a "did you mean" for misspelt names.
"""

from __future__ import annotations

import os
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic

from runtime._yaml_build import MAX_DEPTH, Builder, YamlPath, format_path, loader_class
from runtime.errors import ConfigError, did_you_mean

__all__ = ["YamlDocument", "YamlPath", "did_you_mean", "format_path", "load_yaml", "parse_yaml"]


@dataclass(frozen=True)
class YamlDocument:
    """Parsed YAML plus the line and column of every key and item.

    Attributes:
        data: The plain Python value (dicts, lists, scalars).
        file: Where it was read from (for messages).
    """

    data: Any
    file: str
    marks: Mapping[YamlPath, tuple[int, int]] = field(default_factory=dict)

    def locate(self, path: Sequence[str | int]) -> tuple[int | None, int | None]:
        """Line and column (1-based) of ``path``, or of its closest known parent."""
        probe = tuple(path)
        while True:
            mark = self.marks.get(probe)
            if mark is not None:
                return mark
            if not probe:
                return None, None
            probe = probe[:-1]

    def error(self, path: Sequence[str | int], message: str) -> ConfigError:
        """A :class:`ConfigError` pointing at ``path`` in this document."""
        line, column = self.locate(path)
        return ConfigError(
            message, file=self.file, line=line, column=column, field=format_path(path) or None
        )

    def validate(
        self,
        model: type[pydantic.BaseModel],
        value: Any,
        path: YamlPath = (),
        *,
        context: Mapping[str, Any] | None = None,
    ) -> tuple[Any, list[ConfigError]]:
        """Validate ``value`` (found at ``path``) as ``model``; errors point into the file."""
        try:
            return model.model_validate(value, context=dict(context or {})), []
        except pydantic.ValidationError as exc:
            return None, [self._from_pydantic(model, err, value, path) for err in exc.errors()]

    def _from_pydantic(
        self, model: type[pydantic.BaseModel], err: Any, value: Any, base: YamlPath
    ) -> ConfigError:
        loc = _data_path(value, err["loc"])
        where = base + loc
        message = str(err["msg"])
        if err["type"] == "extra_forbidden" and loc:
            allowed = _fields_at(model, loc[:-1])
            message = f"unknown field {loc[-1]!r}{did_you_mean(str(loc[-1]), allowed)}"
            if allowed:
                message += f"; allowed: {', '.join(sorted(allowed))}"
        elif err["type"] == "missing":
            message = "this field is required"
        elif err["type"] not in ("value_error", "assertion_error") and "input" in err:
            shown = repr(err["input"])
            message += f" (got {shown if len(shown) <= 60 else shown[:57] + '...'})"
        elif err["type"] == "value_error":
            message = message.removeprefix("Value error, ")
        return self.error(where, message)


def load_yaml(
    path: str | Path, *, env: Mapping[str, str] | None = None, interpolate: bool = False
) -> YamlDocument:
    """Read a YAML file, keeping positions.

    Args:
        path: The file.
        env: Variables for ``${NAME}`` and ``${NAME:-default}`` (default: os.environ).
        interpolate: Replace those references in string values.

    Raises:
        ConfigError: when the file cannot be read, is not YAML, repeats a key, or
            names an environment variable that is not set.
    """
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror or exc}", file=file) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"the file is not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8",
            file=file,
        ) from exc
    return parse_yaml(text, file=file, env=env, interpolate=interpolate)


def parse_yaml(
    text: str,
    *,
    file: str = "<string>",
    env: Mapping[str, str] | None = None,
    interpolate: bool = False,
) -> YamlDocument:
    """Parse YAML text, keeping positions (see :func:`load_yaml`)."""
    import yaml  # here, not at the top: only configuration needs it

    try:
        loader = loader_class()(text)  # it checks every character already
    except yaml.reader.ReaderError as exc:
        bad_line = text.count("\n", 0, exc.position) + 1
        bad_column = exc.position - text.rfind("\n", 0, exc.position)
        char = exc.character
        code = ord(char) if isinstance(char, str) else (char or 0)
        raise ConfigError(
            f"invalid YAML: character U+{code:04X} is not allowed",
            file=file,
            line=bad_line,
            column=bad_column,
        ) from exc
    try:
        node = loader.get_single_node()
        builder = Builder(loader, file, env if env is not None else os.environ, interpolate)
        data = builder.build(node, ()) if node is not None else None
    except RecursionError as exc:  # PyYAML's composer recurses once per nesting level
        raise ConfigError(
            f"invalid YAML: lists or mappings nested too deeply (at most {MAX_DEPTH} levels)",
            file=file,
        ) from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        column = mark.column + 1 if mark is not None else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise ConfigError(f"invalid YAML: {problem}", file=file, line=line, column=column) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", file=file) from exc
    finally:
        loader.dispose()
    return YamlDocument(data, file, types.MappingProxyType(builder.marks if node else {}))


def _data_path(value: Any, loc: Sequence[Any]) -> YamlPath:
    """The path into the data of a pydantic error location: pydantic also puts the
    names of union members (``str``, ``list[str]``) and ``[key]`` into locations, but
    a part that is a key or index of the data is kept even if it looks like one."""
    out: list[str | int] = []
    for part in loc:
        found = _key(value, part)
        if found is not _MISSING:
            value, part = value[found], found
        elif _is_union_tag(part):
            continue
        else:
            value = None
        out.append(part if isinstance(part, str | int) else str(part))
    return tuple(out)


_MISSING = object()


def _key(value: Any, part: Any) -> Any:
    """The key or index of ``value`` that ``part`` names (pydantic gives the keys it
    cannot fit in a C integer as text), or ``_MISSING``."""
    if isinstance(value, Mapping):
        if part in value:
            return part
        return next((k for k in value if isinstance(k, int) and str(k) == part), _MISSING)
    if isinstance(value, list | tuple) and isinstance(part, int) and 0 <= part < len(value):
        return part
    return _MISSING


def _is_union_tag(part: Any) -> bool:
    # pydantic puts the member type's name into the location of union errors
    return isinstance(part, str) and ("[" in part or part in ("str", "int", "float", "bool"))


def _fields_at(model: Any, loc: Sequence[str | int]) -> list[str]:
    """The field names a pydantic model accepts at ``loc`` (for "did you mean")."""
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, pydantic.BaseModel):
            info = current.model_fields.get(str(part))
            if info is None:
                return []
            current = info.annotation
        else:
            args = typing.get_args(current)
            if not args:
                return []
            current = args[-1]  # dict values, list/tuple items
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, pydantic.BaseModel):
        return list(current.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    """Strip ``Optional``/unions down to the one model type, if there is one."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if isinstance(arg, type) and issubclass(arg, pydantic.BaseModel):
                return arg
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return members[0] if len(members) == 1 else annotation
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    return annotation
