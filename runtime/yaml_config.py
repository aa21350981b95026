"""YAML that remembers where every value came from, so configuration errors can name
the file, line, column and field path, with a "did you mean" for misspelt names.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pydantic

if TYPE_CHECKING:
    import yaml

from runtime.errors import ConfigError

__all__ = ["YamlDocument", "YamlPath", "did_you_mean", "format_path", "load_yaml", "parse_yaml"]

YamlPath = tuple[str | int, ...]
"""A location inside a document: mapping keys and list indexes."""

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")

_PLAIN_KEY = re.compile(r"[^\s.\[\]'\"]+")

MAX_DEPTH = 100
"""Deepest nesting of lists and mappings accepted (no configuration needs more)."""

MAX_VALUES = 100_000
"""Most values a document may expand to: aliases are copied where they are used, so
a few lines of nested aliases could otherwise expand to billions ("billion laughs")."""


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


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` when a choice is close to ``name``, else ``""``."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def format_path(path: Sequence[str | int]) -> str:
    """``("roles", "writer", "tools", 1)`` -> ``roles.writer.tools[1]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _PLAIN_KEY.fullmatch(part):  # '', 'a.b', 'x y': quoted, so still readable
            out += f"[{part!r}]"
        else:
            out += f".{part}" if out else part
    return out


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
        loader = _loader_class()(text)  # it checks every character already
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
        builder = _Builder(loader, file, env if env is not None else os.environ, interpolate)
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


@functools.cache
def _loader_class() -> type[yaml.SafeLoader]:
    import yaml

    class Loader(yaml.SafeLoader):
        """A SafeLoader that refuses nesting past :data:`MAX_DEPTH` as soon as it sees
        it: PyYAML's scanner slows down with every open ``[``/``{`` (a few kilobytes of
        brackets took seconds) and its composer recurses once per level."""

        depth = 0

        def fetch_flow_collection_start(self, token_class: Any) -> None:
            if self.flow_level >= MAX_DEPTH:
                raise yaml.scanner.ScannerError(
                    None, None, f"nested more than {MAX_DEPTH} levels deep", self.get_mark()
                )
            super().fetch_flow_collection_start(token_class)

        def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                    raise yaml.composer.ComposerError(
                        None, None, f"nested more than {MAX_DEPTH} levels deep", mark
                    )
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return Loader


class _Builder:
    def __init__(
        self, loader: yaml.SafeLoader, file: str, env: Mapping[str, str], interpolate: bool
    ) -> None:
        self.loader = loader
        self.file = file
        self.env = env
        self.interpolate = interpolate
        self.marks: dict[YamlPath, tuple[int, int]] = {}
        self.values = 0
        self.open: set[int] = set()  # the collections being built (to spot a cycle)

    def build(self, node: yaml.Node, path: YamlPath) -> Any:
        import yaml

        self.values += 1
        if self.values > MAX_VALUES:
            raise self._error(
                node,
                path,
                f"the document expands to more than {MAX_VALUES:,} values "
                "(aliases used too often?)",
            )
        if len(path) > MAX_DEPTH:
            raise self._error(node, path[:MAX_DEPTH], f"nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, yaml.CollectionNode):
            if id(node) in self.open:
                raise self._error(node, path, "an alias refers to its own anchor (a cycle)")
            self.open.add(id(node))
            try:
                return self._collection(node, path)
            finally:
                self.open.discard(id(node))
        value = self._construct(node, path)
        if self.interpolate and isinstance(value, str) and "${" in value:
            value = self._substitute(value, node, path)
        return value

    def _collection(self, node: yaml.Node, path: YamlPath) -> Any:
        import yaml

        if isinstance(node, yaml.MappingNode):
            self.loader.flatten_mapping(node)  # resolve YAML merge keys (<<)
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                key = self._construct(key_node, path)
                if isinstance(key, bool) or not isinstance(key, str | int):
                    key = str(key)  # a bool key would equal 0 or 1 (and pass for a list index)
                here = (*path, key)
                if key in out:
                    first = self.marks[here][0]
                    raise ConfigError(
                        f"key {key!r} appears twice (first on line {first})",
                        file=self.file,
                        line=key_node.start_mark.line + 1,
                        column=key_node.start_mark.column + 1,
                        field=format_path(here),
                    )
                self.marks[here] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                out[key] = self.build(value_node, here)
            return out
        if isinstance(node, yaml.SequenceNode):
            items = []
            for index, item in enumerate(node.value):
                self.marks[(*path, index)] = (item.start_mark.line + 1, item.start_mark.column + 1)
                items.append(self.build(item, (*path, index)))
            return items
        raise AssertionError(f"unexpected YAML node {node!r}")  # pragma: no cover

    def _construct(self, node: yaml.Node, path: YamlPath) -> Any:
        """A scalar (or a complex key) as Python.

        PyYAML's constructors trust explicit tags (``!!int abc``, ``!!bool maybe``) and
        fail with Python's own errors; those, and integers too long to print, become
        errors that point at the value.
        """
        import yaml

        try:
            value = self.loader.construct_object(node, deep=True)
        except yaml.YAMLError:
            raise
        except (ValueError, LookupError, AttributeError, TypeError) as exc:
            raise self._error(node, path, _bad_scalar(node, exc)) from exc
        if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
            raise self._error(node, path, _TOO_LARGE)
        return value

    def _error(self, node: yaml.Node, path: YamlPath, message: str) -> ConfigError:
        return ConfigError(
            message,
            file=self.file,
            line=node.start_mark.line + 1,
            column=node.start_mark.column + 1,
            field=format_path(path) or None,
        )

    def _substitute(self, value: str, node: yaml.Node, path: YamlPath) -> str:
        def replace(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            found = self.env.get(name)
            if found:
                return found
            if default is not None:
                return default
            raise ConfigError(
                f"environment variable {name} is not set (write ${{{name}:-default}} to give "
                "a default)",
                file=self.file,
                line=node.start_mark.line + 1,
                column=node.start_mark.column + 1,
                field=format_path(path),
            )

        return _ENV.sub(replace, value)


_MAX_INT_BITS = 4096
_TOO_LARGE = f"number too large (more than {_MAX_INT_BITS} bits)"


def _bad_scalar(node: yaml.Node, exc: Exception) -> str:
    if isinstance(exc, ValueError) and "Exceeds the limit" in str(exc):
        return _TOO_LARGE  # more digits than Python converts (sys.get_int_max_str_digits)
    tag = str(node.tag).rsplit(":", 1)[-1]
    shown = repr(node.value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"{shown} is not a valid !!{tag}"


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
