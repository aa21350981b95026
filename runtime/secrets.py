"""The secrets this process knows, and the one filter that masks them wherever
Honeycomb writes or shows something.

Secrets are registered where they are configured (:func:`add_secret`): an
OpenAI-compatible endpoint's API key and the values of its extra headers (so an
embeddings model's too), the ``env`` and ``headers`` values of MCP servers, the token
of ``honeycomb serve``'s page, the password of a PostgreSQL run store (its URL's, in
its userinfo or its ``?password=``, ``PGPASSWORD``, or its ``password_env``'s); an
application adds its own (a database password a tool uses). Each stays known while
what registered it lives (``owner``), or for the life of the process; inside
:func:`keeping`, until the block ends at the earliest (a command, whose last lines are
written after its models are gone).

Everything Honeycomb writes or shows goes through :func:`masked`: the run store's
rows, the events given to handlers and to the log, structlog entries, the standard
library's log records of the clients it calls with (:class:`SecretsFilter`), and what
``Executor.run`` returns and raises (the result, an error's text and fields, its
``.partial``). An endpoint's answers are masked as they arrive, errors included, so
no other model and no tool sees a secret an endpoint sends back; their streamed text
too, the end of what came held back while it could be the start of a secret
(:class:`HeldText`). Text about values nothing registers, and must not (a
configuration file's, in its errors, before anything uses them), is masked by the
same rule with :func:`masked_with`.

The rule: every occurrence of a secret is masked as ``[<what> hidden]`` (``[api key
hidden]``), whether other text is glued to it or not, as CI systems mask theirs, and
so is every run of escapes that decodes to one (:mod:`runtime.text`: JSON's and
Python's, in any mix, level under level), so that the text decoded holds the mask
where it held the secret (a tool's arguments, the text a store keeps); a
value shorter than :data:`MIN_LENGTH` characters is no secret to mask (local servers
take any key, and their placeholders, ``ollama``, ``EMPTY``, ``none``, are words
ordinary text says). With no secret known, masking costs one test of a global.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import re
import threading
import urllib.parse
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TextIO, TypeVar

import msgspec
from pydantic import BaseModel

from runtime.text import ESCAPE_DEPTH, open_escape, unescaped, unescaped_views

__all__ = [
    "CREDENTIAL_PARAMETERS",
    "LIBRARY_LOGGERS",
    "MIN_LENGTH",
    "PASSWORD_PARAMETERS",
    "PLAIN_VARIABLES",
    "HeldText",
    "MaskedStream",
    "SecretsFilter",
    "add_env",
    "add_header",
    "add_secret",
    "any_known",
    "header_secrets",
    "is_plain",
    "isolated",
    "keeping",
    "known",
    "mask_error",
    "masked",
    "masked_errors",
    "masked_with",
    "shows_secret",
    "url_secrets",
    "with_mask",
]

MIN_LENGTH = 8
"""Values shorter than this are not masked: placeholders, not secrets."""

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)

_Table = tuple[tuple[str, str], ...]
"""Secrets, each with its mask, longest first."""

# Every secret known, longest first, each with its mask (as text and as bytes):
# replaced whole, never changed in place, as they are read without a lock. Empty:
# nothing to mask.
_texts: _Table = ()
_bytes: tuple[tuple[bytes, bytes], ...] = ()
_longest = 0

_lock = threading.RLock()  # a finalizer may run while the registering thread holds it
_kept: dict[str, str] = {}  # secrets for the life of the process, and what they are
_owned: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()
_scopes: list[dict[str, str]] = []  # the secrets added in each block of keeping()


def add_secret(value: str | None, what: str = "secret", *, owner: object | None = None) -> None:
    """Mask ``value`` wherever Honeycomb writes or shows it, as ``[<what> hidden]``.

    Args:
        value: The secret, without the spaces and line ends around it (read from a
            file, a key often has one); None, or one shorter than :data:`MIN_LENGTH`,
            is ignored.
        what: What it is, as the mask says (``api key``, ``token``).
        owner: Keep it while this object lives (None: for the life of the process).
    """
    value = value.strip() if value is not None else None
    if value is None or len(value) < MIN_LENGTH:
        return
    with _lock:
        for scope in _scopes:
            scope.setdefault(value, what)
        if owner is None:
            _kept.setdefault(value, what)
        else:
            held = _owned.get(owner)
            if held is None:
                held = _owned[owner] = {}
                weakref.finalize(owner, _rebuild)  # forgotten with it
            if value in held:
                return
            held[value] = what
        _rebuild()
    _filter_library_logs()


def add_header(value: str | None, *, owner: object | None = None) -> None:
    """A header's value as a secret (see :func:`header_secrets`)."""
    if value is None:
        return
    for secret in header_secrets(value):
        add_secret(secret, "header", owner=owner)


PLAIN_VARIABLES = frozenset(
    {
        "DEBUG",
        "HOME",
        "LANG",
        "LANGUAGE",
        "LOG_LEVEL",
        "LOGLEVEL",
        "LOGNAME",
        "NODE_ENV",
        "NODE_PATH",
        "PATH",
        "PWD",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONHASHSEED",
        "PYTHONIOENCODING",
        "PYTHONPATH",
        "PYTHONUNBUFFERED",
        "PYTHONWARNINGS",
        "SHELL",
        "TEMP",
        "TERM",
        "TMP",
        "TMPDIR",
        "TZ",
        "USER",
        "VIRTUAL_ENV",
    }
)
"""Environment variables whose values are settings every program reads, never
secrets (with ``LC_*`` and ``XDG_*``): :func:`add_env` leaves them unmasked, as a
path or a word masked wherever it appears (a project's folder in every file name a
tool shows) helps nobody."""


def add_env(env: Mapping[str, str], what: str = "secret", *, owner: object | None = None) -> None:
    """The values of the environment ``env`` (a server's ``env``) as secrets, but for
    the variables known to hold settings (:data:`PLAIN_VARIABLES`); and the password
    of a URL in one alone too (``DATABASE_URL``), as what uses it may say only that."""
    for name, value in env.items():
        if not is_plain(name):
            add_secret(value, what, owner=owner)
            for password in url_secrets(value):
                add_secret(password, "password", owner=owner)


def is_plain(variable: str) -> bool:
    """Whether the environment variable ``variable`` holds a setting, not a secret."""
    return variable in PLAIN_VARIABLES or variable.startswith(("LC_", "XDG_"))


def header_secrets(value: str) -> tuple[str, ...]:
    """What of a header's value is secret: the whole of it, and its credentials alone
    when it names its scheme first (``Bearer <token>``, ``Basic <credentials>``)."""
    scheme, _, credentials = value.strip().partition(" ")
    if credentials and scheme.isalpha():
        return value, credentials.strip()
    return (value,)


def url_secrets(text: str) -> list[str]:
    """The passwords of the URLs in ``text``: their userinfo's
    (``postgresql://user:PASSWORD@host/db``), each followed by the credentials an HTTP
    client sends for it (``Authorization: Basic <base64 of user:password>``, which an
    endpoint may echo), and their parameters that carry a credential
    (:data:`CREDENTIAL_PARAMETERS`: ``?password=PASSWORD``, which libpq takes too, or
    an endpoint's ``?key=KEY``); each as written, then percent-decoded where that
    differs."""
    found: list[str] = []
    for match in _URL.finditer(text):
        users, at, _ = match.group("authority").rpartition("@")
        user, colon, password = users.partition(":")
        if at and colon and password:
            plain = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
            found += [password, base64.b64encode(plain.encode()).decode("ascii")]
            found.append(urllib.parse.unquote(password))
        for pair in (match.group("query") or "").split("&"):
            key, equals, value = pair.partition("=")
            if equals and value and urllib.parse.unquote(key).lower() in CREDENTIAL_PARAMETERS:
                found += [value, urllib.parse.unquote(value)]
    return list(dict.fromkeys(found))  # each once, in order


_URL = re.compile(
    r"[A-Za-z][A-Za-z0-9+.-]*://(?P<authority>[^\s/?#]*)[^\s?#]*(?:\?(?P<query>[^\s#]*))?"
)
"""A URL's scheme, authority (``user:password@host:port``), path and query."""

PASSWORD_PARAMETERS = frozenset({"password", "sslpassword"})
"""The query parameters that carry a password (libpq's: the server's, the client key's)."""

CREDENTIAL_PARAMETERS = PASSWORD_PARAMETERS | {
    "access_token",
    "api-key",
    "api_key",
    "apikey",
    "client_secret",
    "key",
    "sig",
    "token",
}
"""The query parameters whose values are credentials (their names in any case): the
passwords, and the keys and tokens an endpoint takes in its URL (``?key=``, an SAS
``sig``)."""


def masked_with(text: str, secrets: Mapping[str, str]) -> str:
    """``text`` with each of ``secrets`` (a value, and what it is as the mask says)
    masked by the rule of :func:`masked`, known or not: for text about values nothing
    has registered, and must not, as a configuration's before anything uses them."""
    table = _table(secrets)
    return _text(text, table) if table else text


def any_known() -> bool:
    """Whether any secret is masked now (one test of a global)."""
    return bool(_texts)


def known() -> frozenset[str]:
    """The secrets masked now."""
    with _lock:
        held = [*_owned.values(), *_scopes]
        return frozenset(_kept).union(*(each.keys() for each in held))


@contextlib.contextmanager
def keeping() -> Iterator[None]:
    """Every secret added in the block, whatever its owner, stays known until the block
    ends (and after it while its owner lives): a command's, whose report is written
    after the models that registered their keys are gone, as an eval's is."""
    global _scopes
    scope: dict[str, str] = {}
    with _lock:
        _scopes = [*_scopes, scope]
    try:
        yield
    finally:
        with _lock:
            _scopes = [each for each in _scopes if each is not scope]  # not an equal one
            _rebuild()


@contextlib.contextmanager
def isolated() -> Iterator[None]:
    """Inside the block only the secrets added in it are known; after it, those known
    before again. For tests: what one masks must not depend on what others added."""
    global _kept, _owned, _scopes
    with _lock:
        before = _kept, _owned, _scopes
        _kept, _owned, _scopes = {}, weakref.WeakKeyDictionary(), []
        _rebuild()
    try:
        yield
    finally:
        with _lock:
            _kept, _owned, _scopes = before
            _rebuild()


def _rebuild() -> None:
    """The secrets to mask, from those known now."""
    global _texts, _bytes, _longest
    with _lock:
        values = dict(_kept)
        for held in [*_owned.values(), *_scopes]:
            values.update(held)
        _texts = ordered = _table(values)
        _bytes = tuple((value.encode(), mask.encode()) for value, mask in ordered)
        _longest = len(ordered[0][0]) if ordered else 0


def _table(secrets: Mapping[str, str]) -> _Table:
    """``secrets`` (value: what it is) as masking reads them: each with its mask,
    longest first, without those too short to be secrets."""
    ordered = sorted(
        (
            (value.strip(), f"[{what} hidden]")
            for value, what in secrets.items()
            if len(value.strip()) >= MIN_LENGTH
        ),
        key=lambda item: -len(item[0]),
    )
    return tuple(ordered)


def masked(value: T) -> T:
    """``value`` with every secret in it masked: text, bytes, and what lists, tuples,
    dicts, msgspec structs, pydantic models and exceptions hold (other objects are
    left as they are). The same object when it holds none; a copy otherwise (an
    exception is masked in place)."""
    if not _texts:
        return value
    return _masked(value, set())  # type: ignore[no-any-return]


def mask_error(exc: E) -> E:
    """``exc`` with every secret masked in place, in its arguments and its fields
    (``body``, ``partial``, notes ...), and so in the errors chained to it or grouped
    in it. Returns it."""
    if _texts:
        _error(exc, set())
    return exc


@contextlib.contextmanager
def masked_errors() -> Iterator[None]:
    """Errors raised in the block leave it masked (:func:`mask_error`)."""
    try:
        yield
    except Exception as exc:
        mask_error(exc)
        raise


def with_mask(mask: str) -> tuple[str, ...]:
    """The secrets this process knows that are masked as ``mask``
    (``[password hidden]``): none, one, or several (two passwords)."""
    return tuple(value for value, shown in _texts if shown == mask)


def shows_secret(text: str) -> bool:
    """Whether ``text`` holds a secret."""
    return bool(_texts) and _found(text, _texts)


class HeldText:
    """Streamed text, passed on to ``sink`` with every secret masked. The end of what
    came that could be the start of a secret is held back until the next piece
    says, or :meth:`flush` (at the stream's end) passes it on; :meth:`drop` forgets
    it (an attempt that failed)."""

    def __init__(self, sink: Callable[[str], object]) -> None:
        self.sink = sink
        self.held = ""

    def __call__(self, text: str) -> None:
        if not _texts and not self.held:
            self.sink(text)
            return
        text = _text(self.held + text, _texts)
        cut = _start_of_secret(text)
        self.held = text[cut:]
        if cut:
            self.sink(text[:cut])

    def flush(self) -> None:
        """Pass on what is held back: the stream ended."""
        held, self.held = self.held, ""
        if held:
            self.sink(_text(held, _texts))

    def drop(self) -> None:
        """Forget what is held back."""
        self.held = ""


class MaskedStream:
    """A text stream that passes what is written to it on to ``inner`` with every
    secret masked (held back as :class:`HeldText` holds it, until the next write or
    :meth:`flush`): the command line's standard output and error, so that whatever
    prints there is masked. Everything else is ``inner``'s (``fileno``, ``isatty``,
    ``encoding`` ...)."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self._held = HeldText(inner.write)

    def write(self, text: str) -> int:
        self._held(text)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._held.flush()
        self.inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class SecretsFilter(logging.Filter):
    """A :mod:`logging` filter that masks every secret in the records it passes, as
    :func:`masked` does: their message with its arguments, their traceback, their
    stack and their extra fields. It lets every record through. On a handler
    (``handler.addFilter(SecretsFilter())``) it masks whatever that handler writes,
    from any logger; Honeycomb puts one on the loggers of :data:`LIBRARY_LOGGERS` once
    it knows a secret."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _texts:
            _mask_record(record)
        return True


LIBRARY_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "openai", "mcp", "uvicorn")
"""The libraries Honeycomb calls endpoints and MCP servers with, whose loggers write
what they send: the URL of each request (an endpoint's ``?key=``) at ``INFO``, its
options, headers and messages at ``DEBUG``; and the server of its page, whose access
log writes the address each request asked for (the page's ``?token=``)."""

_LOGGERS_WRITING_REQUESTS = (
    "httpx",
    "httpx2",
    "openai._base_client",
    "mcp.client.sse",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "client",
    "uvicorn.access",
)
"""Those of their loggers that write a request's URL or body, filtered before their
module is loaded (the MCP SDK's is loaded as a server is started): and the MCP SDK's
client session's, which it names ``client`` (outside ``mcp``), and which writes a
notification a server sent that it passes over, its values in its traceback."""

_FILTER = SecretsFilter()


def _filter_library_logs() -> None:
    """Put :data:`_FILTER` on the loggers of :data:`LIBRARY_LOGGERS` (a filter on a
    logger sees its own records only, not its children's: each gets one)."""
    for name in _LOGGERS_WRITING_REQUESTS:
        logging.getLogger(name).addFilter(_FILTER)
    for name, logger in list(logging.root.manager.loggerDict.items()):
        # Not a placeholder: a name that has only children so far.
        if name.partition(".")[0] in LIBRARY_LOGGERS and isinstance(logger, logging.Logger):
            logger.addFilter(_FILTER)


_RECORD_FACTS = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None, "", None)).keys()
    - {"exc_text", "stack_info"}
)
"""What a log record says of where and when it was made, which holds no secret; the
rest (its message, arguments, traceback, stack, extra fields) is masked."""


def _mask_record(record: logging.LogRecord) -> None:
    """Mask ``record`` in place (every handler reads the same record)."""
    try:
        message = record.getMessage()
    except Exception:  # arguments that do not fit: logging shows them as given
        record.msg, record.args = masked(record.msg), masked(record.args)
    else:
        if _found(message, _texts):  # the arguments' text, which may be a URL's
            record.msg, record.args = _text(message, _texts), None
    error = record.exc_info[1] if record.exc_info else None
    if error is not None:
        mask_error(error)
        shown = logging.Formatter().formatException(record.exc_info)  # type: ignore[arg-type]
        if _found(shown, _texts):  # text an error makes of what it holds (a URL)
            record.exc_text = _text(shown, _texts)
    for name, value in list(vars(record).items()):
        if name not in _RECORD_FACTS:
            new = masked(value)
            if new is not value:
                setattr(record, name, new)


def _start_of_secret(text: str) -> int:
    """Where the longest end of ``text`` that may begin a secret starts (``len(text)``:
    none does): the start of a secret, or of escapes that decode to one, or an escape
    the next piece may complete."""
    window = _longest * _WIDEST_ESCAPE  # as long as a secret escaped can be
    offset = max(len(text) - window, 0)
    tail = text[offset:]
    if "\\" not in tail:
        return offset + _start_in(tail, range(len(tail) + 1))
    cut = len(tail)
    for view in unescaped_views(tail):
        # An escape the next piece may complete: the text before it is read as if it
        # ended there, and may begin a secret the escape goes on.
        end = open_escape(view.text)
        end = len(view.text) if end is None else end
        cut = min(cut, _start_in(view.text[:end], view.starts))
    return offset + cut


_WIDEST_ESCAPE = 16
"""Characters that one character of a secret may take, escaped: ``\\UXXXXXXXX`` is 10,
``\\uXXXX`` escaped in turn 7 (and escaped a third time, 8 a character of ASCII)."""


def _start_in(text: str, starts: Sequence[int]) -> int:
    """Where (in ``starts``' terms) the longest end of ``text`` that begins a secret
    starts; ``starts[len(text)]``: none does (the escape that ends it, if any, starts
    there)."""
    for at in range(max(len(text) - _longest + 1, 0), len(text)):
        rest = text[at:]
        if any(form.startswith(rest) for form, _ in _texts):
            return starts[at]
    return starts[len(text)]


def _masked(value: Any, seen: set[int]) -> Any:
    """``value`` masked; ``seen``: the errors masked already (a result holds the error
    that holds it)."""
    kind = type(value)
    if kind is str:
        return _text(value, _texts)
    if kind in _PLAIN:
        return value
    if kind is bytes:
        return _bytes_of(value)
    if _clean(value):  # most values, whole, at C speed
        return value
    if kind is tuple or kind is list:
        return _items(value, seen)
    if kind is dict:
        pairs = tuple(value.items())
        new = _items(pairs, seen)
        return value if new is pairs else dict(new)
    if isinstance(value, msgspec.Struct):
        changed = _changed(value, value.__struct_fields__, seen)
        return msgspec.structs.replace(value, **changed) if changed else value
    if isinstance(value, BaseModel):
        changed = _changed(value, type(value).model_fields, seen)
        return value.model_copy(update=changed) if changed else value
    if isinstance(value, BaseException):
        _error(value, seen)
        return value
    if isinstance(value, str) and _found(value, _texts):  # a str subclass
        return _text(str(value), _texts)
    return value


_PLAIN = frozenset({int, float, bool, type(None)})
"""Types that hold no text: passed over without a call."""


def _clean(value: object) -> bool:
    """Whether ``value`` surely holds no secret, found at C speed: msgpack writes every
    text and bytes of a value as they are, so its encoding holds any secret they do.
    False too for a value it cannot encode (an error, a pydantic model): walk it."""
    try:
        encoded = _encode(value)
    except (TypeError, ValueError, OverflowError):
        return False
    # A backslash may start escapes that decode to one: walk it.
    return b"\\" not in encoded and all(form not in encoded for form, _ in _bytes)


_encode = msgspec.msgpack.Encoder().encode


def _items(items: Any, seen: set[int]) -> Any:
    """A tuple or list masked: itself when no item changes (most do not, and the walk
    makes nothing for them)."""
    for index, item in enumerate(items):
        if type(item) in _PLAIN:
            continue
        new = _masked(item, seen)
        if new is not item:
            rest = [_masked(v, seen) for v in items[index + 1 :]]
            return type(items)([*items[:index], new, *rest])
    return items


def _changed(value: object, names: Iterable[str], seen: set[int]) -> dict[str, Any]:
    """The fields of ``value`` that hold a secret, masked."""
    changed: dict[str, Any] = {}
    for name in names:
        field = getattr(value, name, None)
        if type(field) in _PLAIN:
            continue
        new = _masked(field, seen)
        if new is not field:
            changed[name] = new
    return changed


def _error(exc: BaseException, seen: set[int]) -> None:
    """Mask ``exc`` in place, and the errors chained to it or grouped in it."""
    todo = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        current.args = _masked(current.args, seen)
        for name, field in list(vars(current).items()):
            new = _masked(field, seen)
            if new is not field:
                with contextlib.suppress(AttributeError):  # a read-only property's
                    setattr(current, name, new)
        todo += [e for e in (current.__cause__, current.__context__) if e is not None]
        if isinstance(current, BaseExceptionGroup):
            todo += list(current.exceptions)


def _found(text: str, texts: _Table) -> bool:
    """Whether ``text`` holds one of ``texts``, as it is or as its escapes decode it."""
    if any(form in text for form, _ in texts):
        return True
    view = text
    for _ in range(ESCAPE_DEPTH):
        deeper = unescaped(view)
        if deeper == view:
            return False
        if any(form in deeper for form, _ in texts):
            return True
        view = deeper
    return False


def _text(text: str, texts: _Table) -> str:
    for form, mask in texts:
        if form in text:
            text = text.replace(form, mask)
    while "\\" in text and _found(text, texts):  # escapes that decode to one: mask those
        text = _escaped(text, texts)
    return text


def _escaped(text: str, texts: _Table) -> str:
    """``text`` with the escapes masked that decode to a secret at the first level
    that shows one (each mask in place of the whole escapes it hides)."""
    for view in unescaped_views(text):
        spans = _spans(view.text, texts)
        if spans:
            pieces: list[str] = []
            done = 0
            for start, end, mask in spans:
                pieces += (text[done : view.starts[start]], mask)
                done = view.starts[end]
            return "".join(pieces) + text[done:]
    raise AssertionError("unreachable: _found() saw a secret in a view")  # pragma: no cover


def _spans(text: str, texts: _Table) -> list[tuple[int, int, str]]:
    """Where the secrets of ``texts`` in ``text`` are, in order, none overlapping
    another (longer secrets claimed first), each with its mask."""
    claimed: list[tuple[int, int, str]] = []
    for form, mask in texts:
        at = text.find(form)
        while at != -1:
            end = at + len(form)
            if all(end <= start or at >= stop for start, stop, _ in claimed):
                claimed.append((at, end, mask))
            at = text.find(form, at + 1)
    return sorted(claimed)


def _bytes_of(data: bytes) -> bytes:
    for form, mask in _bytes:
        if form in data:
            data = data.replace(form, mask)
    if b"\\" in data:  # escapes that may decode to one: as text
        text = data.decode("utf-8", "surrogateescape")
        masked_text = _text(text, _texts)
        if masked_text != text:
            data = masked_text.encode("utf-8", "surrogateescape")
    return data
