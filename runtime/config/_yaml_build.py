"""Building values from YAML nodes, bounded: a loader that refuses deep nesting, and
a builder that keeps every value's position, interpolates the environment, expands
aliases within :data:`MAX_VALUES`, refuses numbers too large to be meant, and notes
the values no error may show: those at the paths of secrets, the passwords of URLs,
and what came from the environment (:attr:`Builder.hidden`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from runtime.config.endpoints import endpoint_secrets
from runtime.errors import ConfigError
from runtime.secrets import header_secrets, masked_with

__all__ = [
    "MAX_DEPTH",
    "MAX_VALUES",
    "Builder",
    "Loader",
    "SecretPaths",
    "YamlPath",
    "format_path",
    "is_secret",
    "shown_path",
]

YamlPath = tuple[str | int, ...]
"""A location inside a document: mapping keys and list indexes."""

SecretPaths = Sequence[Sequence[str]]
"""Where secrets are: paths whose values (and everything under them) are secret,
``"*"`` standing for any one key or index: ``[("models", "*", "api_key")]``."""


def is_secret(path: YamlPath, secrets: SecretPaths) -> bool:
    """Whether ``path`` is at or under one of ``secrets``."""
    return _secret_root(path, secrets) is not None


def shown_path(path: YamlPath, secrets: SecretPaths) -> YamlPath:
    """``path`` as an error may name it: cut at the secret it is inside (a key of a
    secret mapping is as secret as its values)."""
    root = _secret_root(path, secrets)
    return path if root is None else path[:root]


def _secret_root(path: YamlPath, secrets: SecretPaths) -> int | None:
    for pattern in secrets:
        if len(path) >= len(pattern) and all(
            want == "*" or want == got for want, got in zip(pattern, path, strict=False)
        ):
            return len(pattern)
    return None


_REFERENCE = re.compile(
    r"\$(?P<literal>\$\{)"  # $${: a literal ${
    r"|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^{}]*))?\}"
    r"|\$\{"  # any other: a reference half written
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BARE_NAME = re.compile(r"\$\$?[A-Z_][A-Z0-9_]*")
"""A whole value that is an environment variable's name after a bare ``$`` (or ``$$``)."""

_PLAIN_KEY = re.compile(r"[^\s.\[\]'\"]+")

_YAML_TAGS = "tag:yaml.org,2002:"
_PLAIN = frozenset({f"{_YAML_TAGS}map", f"{_YAML_TAGS}seq"})
"""The tags of a mapping and a list written without one."""
_MERGE = "tag:yaml.org,2002:merge"
_VALUE = "tag:yaml.org,2002:value"

MAX_DEPTH = 100
"""Deepest nesting of lists and mappings accepted (no configuration needs more)."""

MAX_VALUES = 100_000
"""Most values a document may expand to: aliases are copied where they are used, so
a few lines of nested aliases could otherwise expand to billions ("billion laughs")."""


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


class Builder:
    def __init__(
        self,
        loader: yaml.SafeLoader,
        file: str,
        env: Mapping[str, str],
        interpolate: bool,
        secrets: SecretPaths = (),
        read_where_used: SecretPaths = (),
    ) -> None:
        self.loader = loader
        self.file = file
        self.env = env
        self.interpolate = interpolate
        self.secrets = secrets
        self.read_where_used = read_where_used
        self.hidden: dict[str, str] = {}
        """The values no error may show, each with what it is: those at the paths of
        secrets (wherever an alias puts them), the passwords of URLs, and what came
        from the environment."""
        self.variables: dict[YamlPath, str] = {}
        """The environment variable a value is, whole (``api_key: ${NAME}``), by path."""
        self.marks: dict[YamlPath, tuple[int, int]] = {}
        self.values = 0
        self.open: set[int] = set()  # the collections being built (to spot a cycle)

    def build(self, node: yaml.Node, path: YamlPath) -> Any:
        self._count(node, path)
        if len(path) > MAX_DEPTH:
            raise self._error(node, path[:MAX_DEPTH], f"nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, yaml.CollectionNode):
            if node.tag not in _PLAIN:  # PyYAML's own constructors are not run: said
                what = "mapping" if isinstance(node, yaml.MappingNode) else "list"
                tag = str(node.tag).replace(_YAML_TAGS, "!!", 1)
                message = f"a YAML tag ({tag}) on a {what} means nothing here: remove it"
                raise self._error(node, path, message)
            if id(node) in self.open:
                raise self._error(node, path, "an alias refers to its own anchor (a cycle)")
            self.open.add(id(node))
            try:
                return self._collection(node, path)
            finally:
                self.open.discard(id(node))
        value = self._construct(node, path)
        if self.interpolate and isinstance(value, str) and value.startswith("$"):
            value = self._bare_name(value, node, path)
        if self.interpolate and isinstance(value, str) and "${" in value:
            value = self._substitute(value, node, path)
        self._note(value, path)
        return value

    def _count(self, node: yaml.Node, path: YamlPath) -> None:
        """Count one more value built (or mapping merged), within :data:`MAX_VALUES`."""
        self.values += 1
        if self.values > MAX_VALUES:
            raise self._error(
                node,
                path,
                f"the document expands to more than {MAX_VALUES:,} values "
                "(aliases used too often?)",
            )

    def _note(self, value: Any, path: YamlPath) -> None:
        """Note what of ``value`` no error may show: a scalar at ``path``, or a key of
        the mapping at ``path``."""
        if isinstance(value, str):
            for secret in endpoint_secrets(value):  # a token as an HTTP URL's user too
                self.hidden.setdefault(secret, "password")
        if self._secret(path) and isinstance(value, str | int | float):
            for secret in header_secrets(str(value)):  # a header's credentials too
                self.hidden.setdefault(secret, "secret")

    def _collection(self, node: yaml.Node, path: YamlPath) -> Any:
        if isinstance(node, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for key, (key_node, value_node) in self._entries(node, path).items():
                here = (*path, key)
                self.marks[here] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                self._note(key, path)  # a key of a secret mapping is as secret as its values
                out[key] = self.build(value_node, here)
            return out
        if isinstance(node, yaml.SequenceNode):
            items = []
            for index, item in enumerate(node.value):
                self.marks[(*path, index)] = (item.start_mark.line + 1, item.start_mark.column + 1)
                items.append(self.build(item, (*path, index)))
            return items
        raise AssertionError(f"unexpected YAML node {node!r}")  # pragma: no cover

    def _entries(self, node: yaml.MappingNode, path: YamlPath) -> dict[Any, tuple[Any, Any]]:
        """The key and value nodes of a mapping by key, its merge keys (``<<``)
        resolved as YAML's merge type says: a key the mapping writes overrides a merged
        one, and of the mappings merged, the first that has a key gives it. A key the
        mapping writes twice is an error. (PyYAML's ``flatten_mapping`` cannot tell a
        merged key from a written one, and rewrites the nodes an alias builds again.)"""
        written: dict[Any, tuple[Any, Any]] = {}
        merged: dict[Any, tuple[Any, Any]] = {}
        for key_node, value_node in node.value:
            if key_node.tag != _MERGE:
                key = self._key(key_node, path)
                if key in written:
                    first = written[key][0].start_mark.line + 1
                    shown = "a key" if self._secret(path) else f"key {key!r}"
                    message = f"{shown} appears twice (first on line {first})"
                    raise self._error(key_node, (*path, key), message)
                written[key] = (key_node, value_node)
                continue
            many = isinstance(value_node, yaml.SequenceNode)
            for source in value_node.value if many else [value_node]:
                for key, entry in self._merge(source, path).items():
                    merged.setdefault(key, entry)
        return {**merged, **written}

    def _merge(self, source: yaml.Node, path: YamlPath) -> dict[Any, tuple[Any, Any]]:
        """The entries of a mapping a merge key names, counted as an alias's copy is."""
        if not isinstance(source, yaml.MappingNode):
            raise self._error(source, path, "a merge key (<<) takes a mapping or a list of them")
        self._count(source, path)
        if id(source) in self.open:
            raise self._error(source, path, "an alias refers to its own anchor (a cycle)")
        self.open.add(id(source))
        try:
            return self._entries(source, path)
        finally:
            self.open.discard(id(source))

    def _key(self, node: yaml.Node, path: YamlPath) -> Any:
        """A mapping's key as Python: text or an integer. Any other scalar is kept as
        it is written, for a key is a name: ``yes:``, ``on:`` and ``null:`` are the
        names ``yes``, ``on`` and ``null``, not True twice and None (a bool key would
        also equal 0 or 1, and pass for a list index); a collection, as text."""
        if node.tag == _VALUE:  # the YAML value key (=): plain text here
            return str(node.value)
        key = self._construct(node, path)
        if self.interpolate and isinstance(key, str) and "${" in key.replace("$${", ""):
            raise self._error(
                node,
                (*path, key),
                "a key is a name as it is written: ${NAME} is read from the environment in "
                "values only (write the name itself)",
            )
        if isinstance(key, str) or (isinstance(key, int) and not isinstance(key, bool)):
            return key
        return str(node.value) if isinstance(node, yaml.ScalarNode) else str(key)

    def _construct(self, node: yaml.Node, path: YamlPath) -> Any:
        """A scalar (or a complex key) as Python.

        PyYAML's constructors trust explicit tags (``!!int abc``, ``!!bool maybe``) and
        fail with Python's own errors; those, and integers too long to print, become
        errors that point at the value.
        """
        failure = None
        try:
            value = self.loader.construct_object(node, deep=True)
        except yaml.YAMLError:
            raise
        except (ValueError, LookupError, AttributeError, TypeError) as exc:
            if not self._secret(path):
                raise self._error(node, path, _bad_scalar(node, exc)) from exc
            failure = self._error(node, path, _bad_scalar(node, exc, secret=True))
        if failure is not None:  # raised here, not chained: the exception shows the value
            raise failure
        if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
            raise self._error(node, path, _TOO_LARGE)
        return value

    def _secret(self, path: YamlPath) -> bool:
        return bool(self.secrets) and is_secret(path, self.secrets)

    def _error(self, node: yaml.Node, path: YamlPath, message: str) -> ConfigError:
        return ConfigError(
            masked_with(message, self.hidden),
            file=self.file,
            line=node.start_mark.line + 1,
            column=node.start_mark.column + 1,
            field=self._field(path) or None,
        )

    def _field(self, path: YamlPath) -> str:
        """``path`` as an error names it: cut at a secret, and masked."""
        return masked_with(format_path(shown_path(path, self.secrets)), self.hidden)

    def _bare_name(self, value: str, node: yaml.Node, path: YamlPath) -> str:
        """``value`` itself, unless it is a variable's name after a bare ``$``, as a shell
        writes it (``api_key: $OPENAI_API_KEY``): that is an error, never a key sent as
        written. ``$$NAME`` is the text ``$NAME``."""
        if _BARE_NAME.fullmatch(value) is None:
            return value
        if value.startswith("$$"):
            return value[1:]
        name = value[1:]
        raise self._error(
            node,
            path,
            f"${name} is not read from the environment (${{NAME}} is): write ${{{name}}} to "
            f"read the variable {name}, or $${name} for the text ${name} itself",
        )

    def _substitute(self, value: str, node: yaml.Node, path: YamlPath) -> str:
        """``value`` with its references to the environment replaced (see
        :data:`_REFERENCE`); one half written is an error, never text kept as it is."""

        def replace(match: re.Match[str]) -> str:
            if match.group("literal"):
                return "${"
            name, default = match.group("name"), match.group("default")
            if name is None:
                raise self._error(node, path, _malformed(value, match.end(), self._secret(path)))
            found = self.env.get(name)
            if found:
                self.hidden.setdefault(found, f"${name}")  # where keys live
                if match.group() == value:
                    self.variables[path] = name
                return found
            if default is not None:
                return default
            if match.group() == value and is_secret(path, self.read_where_used):
                self.variables[path] = name  # what uses the value reads it, or asks for it
                return ""
            raise self._error(
                node,
                path,
                f"environment variable {name} is not set (write ${{{name}:-default}} to give "
                "a default)",
            )

        return _REFERENCE.sub(replace, value)


def _malformed(value: str, start: int, secret: bool) -> str:
    """What is wrong with the reference that starts before ``value[start:]`` (past its
    ``${``), quoting it unless it is a secret's."""
    rest = value[start:]
    end = rest.find("}")
    inside = rest if end == -1 else rest[:end]
    written = "${" + inside + ("}" if end != -1 else "")
    if len(written) > 40:
        written = written[:37] + "..."
    shown = "a reference" if secret else repr(written)
    name = _NAME.match(inside)
    if end == -1:
        why = "is not closed: end it with }"
    elif not inside:
        why = "names no variable"
    elif name is not None and inside[name.end() :].startswith(":-"):
        why = "has a default that holds a reference or a brace: write the default itself"
    else:
        why = "does not name a variable: a name is letters, digits and _, not starting with a digit"
    return (
        f"{shown} {why} (write ${{NAME}} or ${{NAME:-default}} for a variable, $${{ for a "
        "literal ${)"
    )


_MAX_INT_BITS = 4096
_TOO_LARGE = f"number too large (more than {_MAX_INT_BITS} bits)"


def _bad_scalar(node: yaml.Node, exc: Exception, *, secret: bool = False) -> str:
    if isinstance(exc, ValueError) and "Exceeds the limit" in str(exc):
        return _TOO_LARGE  # more digits than Python converts (sys.get_int_max_str_digits)
    tag = str(node.tag).rsplit(":", 1)[-1]
    if secret:
        return f"the value (a secret, not shown) is not a valid !!{tag}"
    shown = repr(node.value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"{shown} is not a valid !!{tag}"


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
