"""YAML that remembers where every value came from, so configuration errors can name
the file, line, column and field path, with a "did you mean" for misspelt names.

Secrets (a hive's ``api_key``, header values) never go into an error: given their
paths, an error about one names its field and its type only, and a YAML mistake on
its line says what is wrong without quoting it, nor chaining PyYAML's error (whose
text shows the line). Their values are known before any error is made, with the
passwords of URLs and the values read from the environment (where keys live), and
masked in every error about the document, wherever an alias or a mistake puts them
(:attr:`YamlDocument.hidden`).
"""

from __future__ import annotations

import os
import re
import stat
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pydantic
import yaml
from pydantic_core import ErrorDetails

from runtime.config._yaml_build import (
    MAX_DEPTH,
    Builder,
    Loader,
    SecretPaths,
    YamlPath,
    format_path,
    is_secret,
    shown_path,
)
from runtime.config._yaml_hints import odd_space, plain_words
from runtime.errors import ConfigError, did_you_mean, kind_of
from runtime.secrets import masked_with
from runtime.value import Value, misspelt_not_missing, pydantic_errors, worded

__all__ = [
    "MAX_FILE_BYTES",
    "YamlDocument",
    "YamlPath",
    "YamlPlace",
    "did_you_mean",
    "format_path",
    "load_yaml",
    "parse_yaml",
]


class YamlDocument(Value, frozen=True, kw_only=True):
    """Parsed YAML plus the line and column of every key and item.

    Attributes:
        data: The plain Python value (dicts, lists, scalars).
        file: Where it was read from (for messages).
        marks: The line and column of every key and item, by path.
        secrets: Where secrets are (see :func:`load_yaml`).
        hidden: The values no error about it shows, each with what it is (its mask
            says): those at the paths of ``secrets``, the passwords of URLs, and the
            values of the environment variables it names.
        variables: The environment variable each value that is one whole
            (``api_key: ${NAME}``) was read from, by path: where a key came from.
    """

    data: Any
    file: str
    marks: Mapping[YamlPath, tuple[int, int]] = msgspec.field(default_factory=dict)
    secrets: SecretPaths = ()
    hidden: Mapping[str, str] = msgspec.field(default_factory=dict)
    variables: Mapping[YamlPath, str] = msgspec.field(default_factory=dict)

    def __repr__(self) -> str:  # never the data: it may hold secrets
        return f"YamlDocument(file={self.file!r})"

    def holds_secret(self, path: Sequence[str | int]) -> bool:
        """Whether the value at ``path`` is a secret or holds one."""
        where = tuple(path)
        if not self.secrets:
            return False
        if is_secret(where, self.secrets):
            return True
        return any(p[: len(where)] == where and is_secret(p, self.secrets) for p in self.marks)

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
        """A :class:`ConfigError` pointing at ``path`` in this document, showing none of
        its :attr:`hidden` values."""
        line, column = self.locate(path)
        field = self.hide(format_path(shown_path(tuple(path), self.secrets)))
        return ConfigError(
            self.hide(message), file=self.file, line=line, column=column, field=field or None
        )

    def hide(self, text: str) -> str:
        """``text`` with the document's :attr:`hidden` values masked."""
        return masked_with(text, self.hidden) if self.hidden else text

    def hiding(self, others: Sequence[YamlDocument]) -> YamlDocument:
        """This document, hiding also what ``others`` hide: the files read with it (a
        hive's roles_dir), whose values an error about it may quote."""
        hidden = {k: v for other in others for k, v in other.hidden.items()}
        return msgspec.structs.replace(
            self, hidden=types.MappingProxyType({**hidden, **self.hidden})
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
            problems = misspelt_not_missing(pydantic_errors(exc))
            return None, [self._from_pydantic(model, err, value, path) for err in problems]

    def _from_pydantic(
        self, model: type[pydantic.BaseModel], err: ErrorDetails, value: Any, base: YamlPath
    ) -> ConfigError:
        """pydantic's error ``err`` about ``value``, found at ``base``, worded as a
        mistake of a file (:func:`~runtime.value.worded`), at its line."""

        def shown(loc: YamlPath, given: Any) -> str:
            where = base + loc
            if self.holds_secret(where):  # its field and its type, never its value
                what = "a secret" if is_secret(where, self.secrets) else "it holds a secret"
                return f"{kind_of(given)}; {what}, not shown"
            # Hidden before it is cut: no part of a secret. A key written with nothing
            # after it is None, a word the file does not hold.
            return "no value" if given is None else self.hide(repr(given))

        loc, message = worded(model, err, value, in_python=False, shown=shown)
        return self.error(base + loc, message)


class YamlPlace(Value, frozen=True, kw_only=True):
    """A place in a document: where a value was read, kept with it so that a check
    made later, with other documents at hand, still points into its file (a role read
    from a hive's ``roles_dir`` is checked with the hive's other roles).

    Attributes:
        doc: The document it was read from.
        path: Its path there.
    """

    doc: YamlDocument
    path: YamlPath

    @property
    def written(self) -> Any:
        """The value as the document writes it."""
        value = self.doc.data
        for part in self.path:
            value = value[part]
        return value

    def error(self, field: Sequence[str | int], message: str) -> ConfigError:
        """A :class:`ConfigError` at ``field`` of the value (``("tools", 0)``), in its
        document, showing none of the document's hidden values."""
        return self.doc.error((*self.path, *field), message)


def load_yaml(
    path: str | Path,
    *,
    env: Mapping[str, str] | None = None,
    interpolate: bool = False,
    secrets: SecretPaths = (),
    read_where_used: SecretPaths = (),
) -> YamlDocument:
    """Read a YAML file, keeping positions.

    Args:
        path: The file.
        env: Variables for ``${NAME}`` and ``${NAME:-default}`` (default: os.environ).
        interpolate: Replace those references in string values (``$${`` is a literal
            ``${``); no error shows the values they read.
        secrets: Paths of secret values, ``"*"`` for any key (``[("models", "*",
            "api_key")]``): no error shows what is there, nor where an alias puts it.
        read_where_used: Paths (as ``secrets``) of values that what uses them reads
            from the environment itself (a model's ``api_key``, wherever the model is
            made): one that is a variable whole, ``${NAME}``, of a variable not set is
            no error of the file but an empty value, the name kept in ``variables``,
            for what uses it to ask for it there (and what is never used, never).

    Raises:
        ConfigError: when the file cannot be read, is no regular file (a folder, a
            pipe, a device), is larger than :data:`MAX_FILE_BYTES`, is not YAML,
            repeats a key, names an environment variable that is not set, or holds a
            reference half written (``${NAME``, ``${}``, ``${A:-${B}}``).
    """
    file = str(path)
    try:
        text = _read(Path(path)).decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror or exc}", file=file) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"the file is not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8",
            file=file,
        ) from exc
    return parse_yaml(
        text,
        file=file,
        env=env,
        interpolate=interpolate,
        secrets=secrets,
        read_where_used=read_where_used,
    )


MAX_FILE_BYTES = 4 * 1024 * 1024
"""The largest file read, 4 MiB: far more than any configuration needs, and small
enough that a file that is not one (a log, a dump) is refused before it is read whole."""


def _read(path: Path) -> bytes:
    """The bytes of the regular file at ``path``, read only when it is one and is at
    most :data:`MAX_FILE_BYTES`: a pipe would wait for a writer, a device
    (``/dev/zero``) never ends, and a large file would fill the memory.

    Raises:
        ConfigError: for anything else than a regular file, or a larger one.
        OSError: when it cannot be read.
    """
    mode = path.stat().st_mode  # stat does not open it: a pipe would block here
    if not stat.S_ISREG(mode):
        raise ConfigError(
            f"cannot read the file: it is {_kind(mode)}, not a regular file", file=str(path)
        )
    with path.open("rb") as stream:
        data = stream.read(MAX_FILE_BYTES + 1)  # bounded: it may grow as it is read
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(
            f"the file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB, far more than "
            "a configuration needs: is it the file meant?",
            file=str(path),
        )
    return data


def _kind(mode: int) -> str:
    """What a file that is not a regular one is, by its ``st_mode``."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def parse_yaml(
    text: str,
    *,
    file: str = "<string>",
    env: Mapping[str, str] | None = None,
    interpolate: bool = False,
    secrets: SecretPaths = (),
    read_where_used: SecretPaths = (),
) -> YamlDocument:
    """Parse YAML text, keeping positions (see :func:`load_yaml`)."""
    try:
        loader = Loader(text)  # it checks every character already
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
    odd = odd_space(text)
    if odd is not None:
        said, line, column = odd
        loader.dispose()
        raise ConfigError(f"invalid YAML: {said}", file=file, line=line, column=column)
    env = env if env is not None else os.environ
    builder = Builder(loader, file, env, interpolate, secrets, read_where_used)
    failure = None
    try:
        node = loader.get_single_node()
        data = builder.build(node, ()) if node is not None else None
    except RecursionError as exc:  # PyYAML's composer recurses once per nesting level
        raise ConfigError(
            f"invalid YAML: lists or mappings nested too deeply (at most {MAX_DEPTH} levels)",
            file=file,
        ) from exc
    except yaml.MarkedYAMLError as exc:
        failure = _syntax_error(exc, text, file, secrets)
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {type(exc).__name__}", file=file) from None
    finally:
        loader.dispose()
    if failure is not None:
        # Raised here, not in the handler, so that PyYAML's own error, whose text shows
        # the line (and a secret on it), is not its context either.
        raise failure
    marks = types.MappingProxyType(builder.marks if node else {})
    return YamlDocument(
        data=data,
        file=file,
        marks=marks,
        secrets=tuple(tuple(p) for p in secrets),
        hidden=types.MappingProxyType(builder.hidden),
        variables=types.MappingProxyType(builder.variables),
    )


def _syntax_error(
    exc: yaml.MarkedYAMLError, text: str, file: str, secrets: SecretPaths
) -> ConfigError:
    """A YAML mistake as a ConfigError at its line and column, chained to a copy of
    PyYAML's error without the lines it quotes; on a line that holds a secret, what
    the problem quotes (an alias, a tag, a character) is left out too."""
    marks = [m for m in (exc.problem_mark, exc.context_mark) if m is not None]
    keys = {pattern[-1] for pattern in secrets if pattern}
    secret = any(_secret_line(text, m.line, keys) for m in marks)
    problem, context = exc.problem, exc.context
    if secret:
        problem, context = _unquoted(problem), _unquoted(context)
    cut = (problem, context) != (exc.problem, exc.context)

    def bare(mark: yaml.Mark | None) -> yaml.Mark | None:
        if mark is None:
            return None
        return yaml.Mark(mark.name, mark.index, mark.line, mark.column, None, 0)  # no snippet

    cause = type(exc)(context, bare(exc.context_mark), problem, bare(exc.problem_mark))
    mark = exc.problem_mark or exc.context_mark
    said = problem or context or "invalid YAML"
    at_end = exc.problem_mark is not None and exc.problem_mark.index >= len(text)
    plain = plain_words(exc, text)  # what to write instead, quoting nothing of the file
    if plain is not None:
        (said, mark), cut = plain, False
    elif at_end and exc.context_mark is not None:
        # The file ended inside something left open (a [, a {, a quote): the mistake is
        # where that began, not past the last line.
        mark = exc.context_mark
        opened = (context or "").removeprefix("while parsing ").removeprefix("while scanning ")
        said = f"the file ends inside {opened or 'something'} begun here ({problem})"
    error = ConfigError(
        f"invalid YAML: {said}"
        + (" (what it quotes is left out: the line holds a secret)" if cut else ""),
        file=file,
        line=mark.line + 1 if mark is not None else None,
        column=mark.column + 1 if mark is not None else None,
    )
    error.__cause__ = cause
    return error


def _secret_line(text: str, line: int, keys: set[str]) -> bool:
    """Whether line ``line`` (0-based) of ``text`` is the key of a secret or inside
    one: it, or a line it is indented under, names one of ``keys``."""
    if not keys:
        return False
    names = "|".join(re.escape(k) for k in keys)
    key = re.compile(rf"(?:^|[\s{{,\-])[\"']?(?:{names})[\"']?\s*:")
    lines = text.split("\n")
    indent: int | None = None
    for index in range(min(line, len(lines) - 1), -1, -1):
        current = lines[index]
        if not current.strip() or current.lstrip().startswith("#"):
            continue
        width = len(current) - len(current.lstrip(" "))
        if indent is not None and width >= indent:
            continue  # a sibling or a child of a line seen: not above the mistake
        if key.search(current):
            return True
        indent = width
        if width == 0:
            return False
    return False


def _unquoted(text: str | None) -> str | None:
    """``text`` without what it quotes from the document (an alias, a tag, a
    character), keeping what it quotes of YAML's own syntax (``','``, ``'<scalar>'``)."""
    if text is None:
        return None

    def keep(match: re.Match[str]) -> str:
        quoted = match.group(1) if match.group(1) is not None else match.group(2)
        syntax = re.fullmatch(r"[^\w\s'\"]|<[\w ]+>", quoted) is not None
        return match.group(0) if syntax else ""

    return re.sub(r"""\s*(?:'([^']*)'|"([^"]*)")""", keep, text)
